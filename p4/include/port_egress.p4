// Weft pipeline: egress port and queue statistics, the queue-depth samples adaptive routing
// reads, and the per-(port, queue) configuration: ECN thresholds and PFC thresholds and state.
//
// queue_config_table is the one table a forwarded packet applies in egress: its entry holds
// everything about the packet's queue, including the counter cells of the queue (indices the
// plugin computes once instead of every packet computing them), and its action does all the
// per-packet queue work. What is rare runs after it, each behind one condition: ECN marking
// (ECN_DUE), a PFC frame (meta.pfc_event), PSN tracking, postcards.
#ifndef WEFT_PORT_EGRESS_P4
#define WEFT_PORT_EGRESS_P4

// Per (egress port, priority): 0 = not pausing; p + 1 = we paused upstream port p. Data-plane
// state only (set_queue_config_pfc).
@id(ID_PFC_STATE_REG)
register<bit<16>>(NUM_PORT_QUEUES) pfc_state_reg;

// Per (egress port, priority): 1 = held: the port's peer paused this priority with a PFC frame.
// The plugin writes it over BMv2's Thrift API when the frame's packet-in arrives and clears it
// when the pause ends (a zero-quanta frame, or the quanta run out at the port's speed).
// set_queue_config_pfc reads it; a held packet is not sent but goes around (PfcHold, pfc.p4).
@id(ID_PFC_HOLD_REG)
register<bit<1>>(NUM_PORT_QUEUES) pfc_hold_reg;

// The histogram bucket of this packet's enqueue depth: min(enq_qdepth >> shift, 15).
#define HISTOGRAM_CELL(base, shift)                                                            \
    (base + ((sm.enq_qdepth >> shift) > QDEPTH_HIST_BUCKETS - 1                               \
             ? (bit<32>)(QDEPTH_HIST_BUCKETS - 1) : (bit<32>)(sm.enq_qdepth >> shift)))

// Counters, depth sample and ECN thresholds of one queue. A held packet is not sent: it counts
// in DROP_PORT's cells (which no packet leaves by) and not in the depth histogram, but its
// depth sample stands (adaptive routing and trimming see the queue backed up).
#define QUEUE_STATS(held, port_index, queue_index, histogram_base, histogram_shift,            \
                    ecn_enabled, kmin, kmax, pmax_percent)                                     \
    port_tx_counter.count(held == 1 ? (bit<32>)DROP_PORT : port_index);                       \
    queue_tx_counter.count(held == 1 ? (bit<32>)DROP_PORT * NUM_QUEUES : queue_index);         \
    queue_depth_reg.write(port_index, sm.deq_qdepth);                                         \
    queue_class_depth_reg.write(queue_index, sm.deq_qdepth);                                  \
    queue_depth_histogram.count(held == 1 ? (bit<32>)DROP_PORT * QDEPTH_HIST_BUCKETS           \
                                          : HISTOGRAM_CELL(histogram_base, histogram_shift)); \
    meta.ecn_cfg = ecn_enabled == 1 ? queue_index ++ kmin ++ kmax ++ pmax_percent : ECN_CFG_OFF;

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

    // Written by the plugin for every (port, queue) of its ports, from CONFIG_DB
    // WRED_PROFILE/QUEUE (ECN, moved at run time by its tuner), BUFFER_PG/BUFFER_PROFILE and
    // PORT_QOS_MAP (PFC), converted to packets:
    //   port_index      = port           (the cells of port_tx_counter and queue_depth_reg)
    //   queue_index     = port * 8 + queue (queue_tx_counter, ecn_mark_counter, PFC state)
    //   histogram_base  = port * 16      (queue_depth_histogram)
    //   histogram_shift queue-depth histogram bucket = enq_qdepth >> shift (saturating at 15)
    //   ecn_enabled     0: no marking (kmin, kmax, pmax_percent ignored)
    //   kmin, kmax      packets; pmax_percent 0..100
    // and, set_queue_config_pfc only (lossless queues with PFC):
    //   xoff            pause when a lossless packet leaves the queue at depth >= xoff
    //   xon             resume when a packet leaves the queue at depth <= xon
    //   quanta          pause time in the PAUSE frame (512-bit-time units)
    @id(ID_SET_QUEUE_CONFIG)
    action set_queue_config(bit<32> port_index, bit<32> queue_index, bit<32> histogram_base,
                            bit<8> histogram_shift, bit<1> ecn_enabled, bit<32> kmin,
                            bit<32> kmax, bit<32> pmax_percent) {
        QUEUE_STATS(1w0, port_index, queue_index, histogram_base, histogram_shift, ecn_enabled,
                    kmin, kmax, pmax_percent)
    }

    // Also reads the queue's hold (pfc_hold_reg): a held packet sets meta.hold and still runs
    // the PFC state, so a queue held by its peer pauses its own upstream at xoff.
    @id(ID_SET_QUEUE_CONFIG_PFC)
    action set_queue_config_pfc(bit<32> port_index, bit<32> queue_index, bit<32> histogram_base,
                                bit<8> histogram_shift, bit<1> ecn_enabled, bit<32> kmin,
                                bit<32> kmax, bit<32> pmax_percent,
                                bit<32> xoff, bit<32> xon, bit<16> quanta) {
        bit<1> held;
        pfc_hold_reg.read(held, queue_index);
        meta.hold = held == 1 ? 1w1 ++ 2w0 ++ sm.egress_port ++ (bit<3>)sm.priority ++ 8w0
                                ++ sm.ingress_port
                              : 32w0;
        QUEUE_STATS(held, port_index, queue_index, histogram_base, histogram_shift, ecn_enabled,
                    kmin, kmax, pmax_percent)
        PFC_STATE(queue_index, xoff, xon, quanta)
    }

    // A queue without an entry: counted and sampled like the others (indices computed here),
    // no ECN, no PFC. The plugin sets histogram_shift here too.
    @id(ID_QUEUE_CONFIG_DEFAULT)
    action queue_config_default(bit<8> histogram_shift) {
        QUEUE_STATS(1w0, (bit<32>)sm.egress_port,
                    (bit<32>)sm.egress_port * NUM_QUEUES + (bit<32>)sm.priority,
                    (bit<32>)sm.egress_port * QDEPTH_HIST_BUCKETS,
                    histogram_shift, 1w0, 32w0, 32w0, 32w0)
    }

    @id(ID_QUEUE_CONFIG_TABLE)
    @weft_owner("plugin", "from CONFIG_DB WRED_PROFILE, QUEUE, BUFFER_PG, BUFFER_PROFILE and PORT_QOS_MAP")
    table queue_config_table {
        key = {
            sm.egress_port : exact @name("port") @format(PORT_NAME);
            sm.priority : exact @name("queue");
        }
        actions = {
            set_queue_config;
            set_queue_config_pfc;
            @defaultonly queue_config_default;
        }
        default_action = queue_config_default(0);
        size = QUEUE_CONFIG_TABLE_SIZE;
    }

    // Packet-out, PFC frames and postcards: sent, not queued traffic of a class.
    @hidden action count_tx() {
        port_tx_counter.count((bit<32>)sm.egress_port);
    }

    apply {
        if (QUEUED_TRAFFIC) {
            queue_config_table.apply();
        } else {
            count_tx();
        }
    }
}

#endif
