// Weft pipeline: egress port statistics and the queue-depth samples adaptive routing reads.
#ifndef WEFT_PORT_EGRESS_P4
#define WEFT_PORT_EGRESS_P4

control PortEgress(inout headers_t hdr,
                   inout local_metadata_t meta,
                   inout standard_metadata_t sm) {
    // Everything that leaves a port, generated PFC frames and postcards included.
    @id(ID_PORT_TX_COUNTER)
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_tx_counter;

    // Enqueue depth histogram, index port * 16 + min(enq_qdepth >> histogram_shift, 15): the
    // plugin's ECN tuner (issue 8) reads it as a distribution between two polls.
    @id(ID_QUEUE_DEPTH_HISTOGRAM)
    counter(NUM_QDEPTH_HIST, CounterType.packets) queue_depth_histogram;

    // Forwarded packets per (port, queue), index port * 8 + queue: the denominator of the
    // ECN-marked fraction per queue.
    @id(ID_QUEUE_TX_COUNTER)
    counter(NUM_PORT_QUEUES, CounterType.packets_and_bytes) queue_tx_counter;

    apply {
        port_tx_counter.count((bit<32>)sm.egress_port);
        if (sm.instance_type == INSTANCE_TYPE_NORMAL && meta.from_cpu == 0) {
            queue_tx_counter.count((bit<32>)sm.egress_port * NUM_QUEUES
                                   + (bit<32>)meta.traffic_class);
            queue_depth_reg.write((bit<32>)sm.egress_port, (bit<32>)sm.deq_qdepth);
            bit<32> bucket = (bit<32>)(sm.enq_qdepth >> meta.histogram_shift);
            if (bucket >= QDEPTH_HIST_BUCKETS) {
                bucket = QDEPTH_HIST_BUCKETS - 1;
            }
            queue_depth_histogram.count((bit<32>)sm.egress_port * QDEPTH_HIST_BUCKETS + bucket);
        }
    }
}

#endif
