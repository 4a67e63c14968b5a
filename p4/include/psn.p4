// Weft pipeline: RoCE reordering awareness at the last hop toward a host.
//
// Per QP slot (crc16 of destination address + destination QP, PSN_SLOTS slots) the egress keeps
// the highest PSN seen + 1 ("expected"). A BTH data packet (RC SEND or RDMA WRITE) with
//   psn == expected          in order
//   psn  > expected (mod 2^24, within half the space)   out of order: PSNs were skipped
//   psn  < expected          regression: an older PSN (retransmission or late packet)
// Both anomalies are counted per egress port, i.e. per host the packets go to, so reordering is
// attributed to its destination from the switch's own counts (sum the ports for the switch).
// Only requests are numbered one by one: an ACK carries the PSN it acknowledges (coalesced, it
// skips ahead by design), a CNP none, so neither is tracked. The first packet of a slot only
// starts tracking.
#ifndef WEFT_PSN_P4
#define WEFT_PSN_P4

// BTH opcodes 0x00..0x0B: RC SEND and RDMA WRITE (first, middle, last, only, with immediate).
#define BTH_OPCODE_RC_REQUESTS_END 8w0x0c

control PsnTracker(inout headers_t hdr,
                   inout local_metadata_t meta,
                   inout standard_metadata_t sm) {
    // Indexed by egress port.
    @id(ID_PSN_OUT_OF_ORDER_COUNTER)
    counter(NUM_PORTS, CounterType.packets) psn_out_of_order_counter;
    @id(ID_PSN_REGRESSION_COUNTER)
    counter(NUM_PORTS, CounterType.packets) psn_regression_counter;

    // bit 24: slot in use; bits 23..0: expected PSN.
    @id(ID_PSN_EXPECTED_REG)
    register<bit<32>>(PSN_SLOTS) psn_expected_reg;

    // Host-facing ports, written by the controller. The slot (crc16 of the destination address
    // as 128 bits and the destination QP) and its state, and what this packet means for it.
    @id(ID_ENABLE_PSN_TRACKING)
    action enable_psn_tracking() {
        bit<32> state;
        hash(meta.psn_slot, HashAlgorithm.crc16, 32w0,
             { (hdr.ipv4.isValid() ? (bit<128>)hdr.ipv4.dst_addr : hdr.ipv6.dst_addr)
               ++ hdr.bth.dst_qp },
             (bit<32>)PSN_SLOTS);
        psn_expected_reg.read(state, meta.psn_slot);
        // diff = psn - expected: 0 in order, below half the PSN space skipped ahead, else older.
        meta.psn_event =
              (state[24:24] == 1 && hdr.bth.psn != state[23:0]
               && hdr.bth.psn - state[23:0] < 24w0x800000
               ? PSN_EVENT_OUT_OF_ORDER : PSN_EVENT_NONE)
            | (state[24:24] == 1 && hdr.bth.psn - state[23:0] >= 24w0x800000
               ? PSN_EVENT_REGRESSION : PSN_EVENT_NONE);
        // The first packet of a slot starts tracking; a regression leaves the expected PSN.
        // state becomes the state written back.
        state = meta.psn_event == PSN_EVENT_REGRESSION ? state
                                                                : 8w1 ++ (hdr.bth.psn + 1);
        psn_expected_reg.write(meta.psn_slot, state);
    }

    @id(ID_PSN_TRACKING_DISABLED)
    action psn_tracking_disabled() { }

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

    @hidden action count_out_of_order() {
        psn_out_of_order_counter.count((bit<32>)sm.egress_port);
    }

    @hidden action count_regression() {
        psn_regression_counter.count((bit<32>)sm.egress_port);
    }

    apply {
        if (hdr.bth.opcode < BTH_OPCODE_RC_REQUESTS_END) {
            psn_tracking_table.apply();
            if (meta.psn_event == PSN_EVENT_OUT_OF_ORDER) {
                count_out_of_order();
            } else if (meta.psn_event == PSN_EVENT_REGRESSION) {
                count_regression();
            }
        }
    }
}

#endif
