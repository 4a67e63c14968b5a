// Weft pipeline: priority flow control.
//
//   ingress  PfcRx        count PFC frames received per (port, priority); send each to the CPU
//                         port as a packet-in (reason PACKET_IN_REASON_PFC, the ingress port),
//                         so the plugin can act on it within milliseconds; never forwarded
//   ingress  PfcWatchdog  (egress port, priority) -> drop | forward, installed by the plugin's
//                         watchdog when it sees a pause storm; looked up only for egress ports
//                         switch_config_table's watchdog_ports names
//   egress   PFC_STATE    (in queue_config_table's set_queue_config_pfc, port_egress.p4) a
//                         lossless packet leaves its queue with >= xoff packets still queued:
//                         a PAUSE is due toward the port it came from; a packet leaving that
//                         queue at <= xon: a RESUME (quanta 0) toward the port paused. Both use
//                         the depth at dequeue, the freshest BMv2 offers: the enqueue-time depth
//                         of packets queued long ago would re-pause after a resume.
//   egress   PfcEgress    normal: clone toward that port; clone: build the PFC frame
//
// BMv2 does not pause a queue when it receives PFC: frames are generated and counted, and the
// thresholds act on the BMv2 egress queue depth (in packets), which is all BMv2 measures.
#ifndef WEFT_PFC_P4
#define WEFT_PFC_P4

#define PFC_RX_COUNT(i, t)                                   \
    if (hdr.pfc.class_enable[i:i] == 1) {                    \
        if (t != 0) {                                        \
            pfc_rx_pause_counter.count(base + i);            \
        } else {                                             \
            pfc_rx_resume_counter.count(base + i);           \
        }                                                    \
    }

control PfcRx(inout headers_t hdr,
              inout local_metadata_t meta,
              inout standard_metadata_t sm) {
    // Index port * 8 + priority. Pause = non-zero quanta, resume = zero quanta.
    @id(ID_PFC_RX_PAUSE_COUNTER)
    counter(NUM_PORT_QUEUES, CounterType.packets) pfc_rx_pause_counter;
    @id(ID_PFC_RX_RESUME_COUNTER)
    counter(NUM_PORT_QUEUES, CounterType.packets) pfc_rx_resume_counter;

    @hidden action pfc_consume() {
        mark_to_drop(sm);
        exit;
    }

    // The frame as it arrived (class-enable vector and quanta are its payload), to the CPU port
    // on queue 0. from_cpu = 1: egress only counts it, as it does packet-out (it is not a
    // class's traffic).
    @hidden action pfc_to_cpu() {
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = (bit<16>)sm.ingress_port;
        hdr.packet_in.reason = PACKET_IN_REASON_PFC;
        sm.egress_spec = CPU_PORT;
        sm.priority = 0;
        meta.from_cpu = 1;
        exit;
    }

    apply {
        if (hdr.pfc.opcode == PFC_OPCODE) {
            bit<32> base = (bit<32>)sm.ingress_port * NUM_QUEUES;
            PFC_RX_COUNT(0, hdr.pfc.time0)
            PFC_RX_COUNT(1, hdr.pfc.time1)
            PFC_RX_COUNT(2, hdr.pfc.time2)
            PFC_RX_COUNT(3, hdr.pfc.time3)
            PFC_RX_COUNT(4, hdr.pfc.time4)
            PFC_RX_COUNT(5, hdr.pfc.time5)
            PFC_RX_COUNT(6, hdr.pfc.time6)
            PFC_RX_COUNT(7, hdr.pfc.time7)
            pfc_to_cpu();
        }
        // Other MAC control frames end at the MAC: never forwarded, and not a drop worth
        // counting.
        pfc_consume();
    }
}

control PfcWatchdog(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t sm) {
    // Packets that hit a watchdog entry, per entry (SONiC PFC_WD drop statistics).
    @id(ID_PFC_WATCHDOG_COUNTER)
    direct_counter(CounterType.packets_and_bytes) pfc_watchdog_counter;

    @id(ID_PFC_WATCHDOG_DROP)
    action pfc_watchdog_drop() {
        meta.drop_reason = DROP_REASON_PFC_WATCHDOG;
        mark_to_drop(sm);
    }

    @id(ID_PFC_WATCHDOG_FORWARD)
    action pfc_watchdog_forward() { }

    @id(ID_PFC_WATCHDOG_NONE)
    action pfc_watchdog_none() { }

    @id(ID_PFC_WATCHDOG_TABLE)
    @weft_owner("plugin", "the plugin's PFC watchdog")
    table pfc_watchdog_table {
        key = {
            sm.egress_spec : exact @name("port") @format(PORT_NAME);
            sm.priority : exact @name("priority");
        }
        actions = {
            pfc_watchdog_drop;
            pfc_watchdog_forward;
            @defaultonly pfc_watchdog_none;
        }
        const default_action = pfc_watchdog_none();
        counters = pfc_watchdog_counter;
        size = PFC_WATCHDOG_TABLE_SIZE;
    }

    apply {
        pfc_watchdog_table.apply();
    }
}

// set_queue_config_pfc's PFC state machine (port_egress.p4), per (egress port, priority): the
// state is 0 (not pausing) or 1 + the upstream port paused. A lossless packet leaving at
// >= xoff while not pausing makes a PAUSE due toward the port it came from; one leaving at
// <= xon while pausing makes a RESUME due toward the port paused. meta.pfc_event = 1 + that
// port (0: nothing due); PfcEgress then clones the packet toward it.
#define PFC_STATE(queue_index, xoff, xon, quanta)                                            \
    bit<16> pfc_state;                                                                       \
    pfc_state_reg.read(pfc_state, queue_index);                                              \
    meta.pfc_event =                                                                         \
          (meta.lossless == 1 && pfc_state == 0 && (bit<32>)sm.deq_qdepth >= xoff            \
           ? (bit<16>)sm.ingress_port + 1 : 16w0)                                            \
        | (meta.lossless == 1 && pfc_state != 0 && (bit<32>)sm.deq_qdepth <= xon             \
           ? pfc_state : 16w0);                                                              \
    meta.pfc_quanta = pfc_state == 0 ? quanta : 16w0;                                        \
    /* pfc_state becomes the value written back: an expression would be a temporary */       \
    pfc_state = (pfc_state == 0 ? meta.pfc_event : 16w0)                                     \
              | (pfc_state != 0 && meta.pfc_event == 0 ? pfc_state : 16w0);                  \
    pfc_state_reg.write(queue_index, pfc_state);

#define PFC_SET_TIME(i, f)                    \
    if (meta.pfc_priority == i) {             \
        f = meta.pfc_quanta;                  \
    }

control PfcEgress(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t sm) {
    // Index port * 8 + priority, counted on the port the frame leaves by.
    @id(ID_PFC_TX_PAUSE_COUNTER)
    counter(NUM_PORT_QUEUES, CounterType.packets) pfc_tx_pause_counter;
    @id(ID_PFC_TX_RESUME_COUNTER)
    counter(NUM_PORT_QUEUES, CounterType.packets) pfc_tx_resume_counter;

    // A PAUSE or RESUME is due (meta.pfc_event, meta.pfc_quanta): clone toward that port.
    @hidden action pfc_send() {
        meta.clone_kind = CLONE_KIND_PFC;
        meta.pfc_priority = (bit<8>)sm.priority;
        meta.pfc_src_mac = meta.router_mac;
        clone_preserving_field_list(CloneType.E2E,
                                    PFC_CLONE_SESSION_BASE + (bit<32>)meta.pfc_event - 1,
                                    FL_CLONE);
    }

    // The clone becomes the PFC frame.
    @hidden action pfc_build() {
        hdr.ipv4.setInvalid();
        hdr.ipv6.setInvalid();
        hdr.tcp.setInvalid();
        hdr.udp.setInvalid();
        hdr.bth.setInvalid();
        hdr.postcard.setInvalid();
        hdr.ethernet.dst_addr = PFC_DST_MAC;
        hdr.ethernet.src_addr = meta.pfc_src_mac;
        hdr.ethernet.ether_type = ETHERTYPE_MAC_CONTROL;
        hdr.pfc.setValid();
        hdr.pfc.opcode = PFC_OPCODE;
        hdr.pfc.class_enable = 16w1 << meta.pfc_priority;
        hdr.pfc.time0 = 0;
        hdr.pfc.time1 = 0;
        hdr.pfc.time2 = 0;
        hdr.pfc.time3 = 0;
        hdr.pfc.time4 = 0;
        hdr.pfc.time5 = 0;
        hdr.pfc.time6 = 0;
        hdr.pfc.time7 = 0;
        PFC_SET_TIME(0, hdr.pfc.time0)
        PFC_SET_TIME(1, hdr.pfc.time1)
        PFC_SET_TIME(2, hdr.pfc.time2)
        PFC_SET_TIME(3, hdr.pfc.time3)
        PFC_SET_TIME(4, hdr.pfc.time4)
        PFC_SET_TIME(5, hdr.pfc.time5)
        PFC_SET_TIME(6, hdr.pfc.time6)
        PFC_SET_TIME(7, hdr.pfc.time7)
        hdr.pfc_pad.setValid();
        hdr.pfc_pad.zeros = 0;
        truncate(PFC_FRAME_BYTES);
    }

    apply {
        if (sm.instance_type == INSTANCE_TYPE_EGRESS_CLONE) {
            pfc_build();
            bit<32> idx = (bit<32>)sm.egress_port * NUM_QUEUES + (bit<32>)meta.pfc_priority;
            if (meta.pfc_quanta == 0) {
                pfc_tx_resume_counter.count(idx);
            } else {
                pfc_tx_pause_counter.count(idx);
            }
        } else {
            pfc_send();
        }
    }
}

#endif
