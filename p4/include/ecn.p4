// Weft pipeline: ECN marking in egress, DCQCN/RED style, on BMv2's queue depth in packets.
//
//   depth <= kmin           never mark
//   kmin < depth < kmax     mark CE with probability pmax * (depth - kmin) / (kmax - kmin)
//   depth >= kmax           always mark
//
// depth = packets in the queue when this packet was enqueued. Only ECT(0)/ECT(1) packets are
// marked; Not-ECT and CE pass unchanged.
#ifndef WEFT_ECN_P4
#define WEFT_ECN_P4

control Ecn(inout headers_t hdr,
            inout local_metadata_t meta,
            inout standard_metadata_t sm) {
    // Index port * 8 + queue.
    @id(ID_ECN_MARK_COUNTER)
    counter(NUM_PORT_QUEUES, CounterType.packets) ecn_mark_counter;

    // Written by the plugin from CONFIG_DB WRED_PROFILE/QUEUE (converted to packets), and moved
    // at run time by its tuner. pmax_percent: 0..100.
    @id(ID_SET_ECN_THRESHOLDS)
    action set_ecn_thresholds(bit<32> kmin, bit<32> kmax, bit<32> pmax_percent) {
        meta.ecn_enabled = 1;
        meta.ecn_kmin = kmin;
        meta.ecn_kmax = kmax;
        meta.ecn_pmax_percent = pmax_percent;
    }

    @id(ID_ECN_DISABLED)
    action ecn_disabled() {
        meta.ecn_enabled = 0;
    }

    @id(ID_ECN_THRESHOLD_TABLE)
    @weft_owner("plugin", "from CONFIG_DB WRED_PROFILE and QUEUE")
    table ecn_threshold_table {
        key = {
            sm.egress_port : exact @name("port") @format(PORT_NAME);
            meta.traffic_class : exact @name("queue");
        }
        actions = {
            set_ecn_thresholds;
            @defaultonly ecn_disabled;
        }
        const default_action = ecn_disabled();
        size = ECN_THRESHOLD_TABLE_SIZE;
    }

    apply {
        if (meta.ecn == 1 || meta.ecn == 2) {
            ecn_threshold_table.apply();
            if (meta.ecn_enabled == 1) {
                bit<32> depth = (bit<32>)sm.enq_qdepth;
                bit<1> mark = 0;
                if (depth >= meta.ecn_kmax) {
                    mark = 1;
                } else if (depth > meta.ecn_kmin) {
                    // P(r < (depth - kmin) * pmax) with r uniform in [0, (kmax - kmin) * 100).
                    bit<32> r;
                    random(r, 32w0, (meta.ecn_kmax - meta.ecn_kmin) * 100 - 1);
                    if (r < (depth - meta.ecn_kmin) * meta.ecn_pmax_percent) {
                        mark = 1;
                    }
                }
                if (mark == 1) {
                    if (hdr.ipv4.isValid()) {
                        hdr.ipv4.ecn = 3;
                    } else if (hdr.ipv6.isValid()) {
                        hdr.ipv6.ecn = 3;
                    }
                    ecn_mark_counter.count((bit<32>)sm.egress_port * NUM_QUEUES
                                           + (bit<32>)meta.traffic_class);
                }
            }
        }
    }
}

#endif
