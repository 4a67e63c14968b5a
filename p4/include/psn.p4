// Weft pipeline: RoCE reordering awareness at the last hop toward a host.
//
// Per QP slot (crc16 of destination address + destination QP, PSN_SLOTS slots) the egress keeps
// the highest PSN seen + 1 ("expected"). A BTH packet with
//   psn == expected          in order
//   psn  > expected (mod 2^24, within half the space)   out of order: PSNs were skipped
//   psn  < expected          regression: an older PSN (retransmission or late packet)
// Both anomalies are counters (readable over P4Runtime; sum the slots for totals). The first
// packet of a slot only starts tracking.
#ifndef WEFT_PSN_P4
#define WEFT_PSN_P4

control PsnTracker(inout headers_t hdr,
                   inout local_metadata_t meta,
                   inout standard_metadata_t sm) {
    @id(ID_PSN_OUT_OF_ORDER_COUNTER)
    counter(PSN_SLOTS, CounterType.packets) psn_out_of_order_counter;
    @id(ID_PSN_REGRESSION_COUNTER)
    counter(PSN_SLOTS, CounterType.packets) psn_regression_counter;

    // bit 24: slot in use; bits 23..0: expected PSN.
    @id(ID_PSN_EXPECTED_REG)
    register<bit<32>>(PSN_SLOTS) psn_expected_reg;

    // Host-facing ports, written by the controller.
    @id(ID_ENABLE_PSN_TRACKING)
    action enable_psn_tracking() {
        meta.psn_track = 1;
    }

    @id(ID_PSN_TRACKING_DISABLED)
    action psn_tracking_disabled() {
        meta.psn_track = 0;
    }

    // The port is a physical port (CONFIG_DB PORT), not a port_config_table entry: tracking
    // needs no router MAC, so the key refers to no table (and ranks with port_config_table).
    @id(ID_PSN_TRACKING_TABLE)
    @weft_owner("controller")
    table psn_tracking_table {
        key = {
            sm.egress_port : exact @name("port") @format(PORT_NAME);
        }
        actions = {
            enable_psn_tracking;
            @defaultonly psn_tracking_disabled;
        }
        const default_action = psn_tracking_disabled();
        size = PSN_TRACKING_TABLE_SIZE;
    }

    apply {
        if (hdr.bth.isValid()) {
            psn_tracking_table.apply();
            if (meta.psn_track == 1) {
                bit<32> slot = 0;
                if (hdr.ipv4.isValid()) {
                    hash(slot, HashAlgorithm.crc16, 32w0,
                         { (bit<128>)hdr.ipv4.dst_addr, hdr.bth.dst_qp }, (bit<32>)PSN_SLOTS);
                } else if (hdr.ipv6.isValid()) {
                    hash(slot, HashAlgorithm.crc16, 32w0,
                         { hdr.ipv6.dst_addr, hdr.bth.dst_qp }, (bit<32>)PSN_SLOTS);
                }
                bit<32> slot_state;
                psn_expected_reg.read(slot_state, slot);
                bit<24> psn = hdr.bth.psn;
                bit<24> next_psn = psn + 1;
                if (slot_state[24:24] == 0) {
                    psn_expected_reg.write(slot, 8w1 ++ next_psn);
                } else {
                    bit<24> diff = psn - slot_state[23:0];
                    if (diff == 0) {
                        psn_expected_reg.write(slot, 8w1 ++ next_psn);
                    } else if (diff < 24w0x800000) {
                        psn_out_of_order_counter.count(slot);
                        psn_expected_reg.write(slot, 8w1 ++ next_psn);
                    } else {
                        psn_regression_counter.count(slot);
                    }
                }
            }
        }
    }
}

#endif
