// Weft pipeline: ECN marking in egress, DCQCN/RED style, on BMv2's queue depth in packets.
//
//   depth <= kmin           never mark
//   kmin < depth < kmax     mark CE with probability pmax * (depth - kmin) / (kmax - kmin)
//   depth >= kmax           always mark
//
// depth = packets in the queue when this packet was enqueued. Only ECT(0)/ECT(1) packets are
// marked; Not-ECT and CE pass unchanged. The thresholds are the packet's queue_config_table
// entry's (meta.ecn_cfg, port_egress.p4); ECN_DUE is the one condition every packet pays, the
// rest runs only for ECT packets above Kmin.
#ifndef WEFT_ECN_P4
#define WEFT_ECN_P4

#define IS_ECT(ip) (ip.isValid() && (ip.ecn == 1 || ip.ecn == 2))
#define ECN_DUE ((bit<32>)sm.enq_qdepth > ECN_CFG_KMIN && (IS_ECT(hdr.ipv4) || IS_ECT(hdr.ipv6)))

control Ecn(inout headers_t hdr,
            inout local_metadata_t meta,
            inout standard_metadata_t sm) {
    // Index port * 8 + queue. Unmarked packets count in the cell of DROP_PORT's last queue,
    // which no packet leaves by.
    @id(ID_ECN_MARK_COUNTER)
    counter(NUM_PORT_QUEUES, CounterType.packets) ecn_mark_counter;

    // P(r < (depth - kmin) * pmax) with r uniform in [0, (kmax - kmin) * 100). Both header's
    // fields are written: the one not valid is not sent.
    @hidden action ecn_mark() {
        bit<32> r;
        random(r, 32w0, (ECN_CFG_KMAX - ECN_CFG_KMIN) * 100 - 1);
        r = ((bit<32>)sm.enq_qdepth >= ECN_CFG_KMAX
                      || r < ((bit<32>)sm.enq_qdepth - ECN_CFG_KMIN) * ECN_CFG_PMAX)
            ? 32w1 : 32w0;
        hdr.ipv4.ecn = r == 1 ? 2w3 : hdr.ipv4.ecn;
        hdr.ipv6.ecn = r == 1 ? 2w3 : hdr.ipv6.ecn;
        ecn_mark_counter.count(r == 1 ? ECN_CFG_QUEUE_INDEX
                                               : (bit<32>)(DROP_PORT * NUM_QUEUES + 7));
    }

    apply {
        ecn_mark();
    }
}

#endif
