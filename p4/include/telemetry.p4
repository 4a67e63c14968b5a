// Weft pipeline: telemetry postcards.
//
//   ingress  TelemetryIngress  (only while switch_config_table's postcard_session is set)
//                              postcard_watch_table hit -> flag WATCHED; else 1 in N (switch
//                              config) -> flag SAMPLED
//   egress   TelemetryEgress   flagged packet: record queue/time facts, clone E2E to the
//                              postcard session (unless this packet already clones a PFC frame);
//                              the clone becomes Ethernet(0x88b5) + postcard + the original L3/L4
//                              headers, truncated; to the CPU port it goes as a packet-in with
//                              reason PACKET_IN_REASON_POSTCARD
#ifndef WEFT_TELEMETRY_P4
#define WEFT_TELEMETRY_P4

control TelemetryIngress(inout headers_t hdr,
                         inout local_metadata_t meta,
                         inout standard_metadata_t sm) {
    FlowKey() flow_key;

    // Written by the controller. IPv4 addresses are matched zero-extended to 128 bits
    // (::a.b.c.d), so one table watches IPv4 and IPv6 flows.
    @id(ID_WATCH_POSTCARD)
    action watch_postcard() {
        meta.postcard_flags = POSTCARD_FLAG_WATCHED;
    }

    @id(ID_POSTCARD_WATCH_MISS)
    action postcard_watch_miss() { }

    @id(ID_POSTCARD_WATCH_TABLE)
    @weft_owner("controller")
    table postcard_watch_table {
        key = {
            meta.flow_src : ternary @name("src_addr");
            meta.flow_dst : ternary @name("dst_addr");
            meta.ip_proto : ternary @name("ip_protocol");
            meta.l4_dst_port : ternary @name("l4_dst_port");
            meta.dst_qp : ternary @name("dst_qp");
        }
        actions = {
            watch_postcard;
            @defaultonly postcard_watch_miss;
        }
        const default_action = postcard_watch_miss();
        size = POSTCARD_WATCH_TABLE_SIZE;
    }

    // 1 in postcard_sample_n (0: never) of the packets not watched; the flow hash for the card
    // (FLOW_HASH from the headers: p4c copies a hash input list of metadata fields into
    // temporaries, one metadata field per element, so hashing FlowKey's six fields costs six).
    @hidden action postcard_sample() {
        bit<32> r;
        FLOW_HASH
        random(r, 32w0, SWITCH_CFG_POSTCARD_SAMPLE_N - 1);
        meta.postcard_flags = meta.postcard_flags == 0 && SWITCH_CFG_POSTCARD_SAMPLE_N != 0
                              && r == 0
            ? POSTCARD_FLAG_SAMPLED : meta.postcard_flags;
    }

    apply {
        flow_key.apply(hdr, meta, sm);
        postcard_watch_table.apply();
        postcard_sample();
    }
}

control TelemetryEgress(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t sm) {
    // A flagged packet (that clones no PFC frame): record the facts, clone to the session.
    @hidden action postcard_clone() {
        meta.clone_kind = CLONE_KIND_POSTCARD;
        meta.pc_flags = meta.postcard_flags;
        meta.pc_switch_id = SWITCH_CFG_SWITCH_ID;
        meta.pc_ingress_port = (bit<16>)sm.ingress_port;
        meta.pc_egress_port = (bit<16>)sm.egress_port;
        meta.pc_queue = (bit<8>)sm.priority;
        meta.pc_enq_qdepth = (bit<32>)sm.enq_qdepth;
        meta.pc_deq_timedelta = sm.deq_timedelta;
        meta.pc_ingress_ts = sm.ingress_global_timestamp;
        meta.pc_egress_ts = sm.egress_global_timestamp;
        meta.pc_flow_hash = meta.flow_hash;
        clone_preserving_field_list(CloneType.E2E, SWITCH_CFG_POSTCARD_SESSION, FL_CLONE);
    }

    // The clone becomes the postcard.
    @hidden action postcard_build() {
        hdr.postcard.setValid();
        hdr.postcard.version = POSTCARD_VERSION;
        hdr.postcard.flags = meta.pc_flags;
        hdr.postcard.next_ether_type = hdr.ethernet.ether_type;
        hdr.postcard.switch_id = meta.pc_switch_id;
        hdr.postcard.ingress_port = meta.pc_ingress_port;
        hdr.postcard.egress_port = meta.pc_egress_port;
        hdr.postcard.queue = meta.pc_queue;
        hdr.postcard.reserved = 0;
        hdr.postcard.reserved2 = 0;
        hdr.postcard.enq_qdepth = meta.pc_enq_qdepth;
        hdr.postcard.deq_timedelta = meta.pc_deq_timedelta;
        hdr.postcard.ingress_ts = meta.pc_ingress_ts;
        hdr.postcard.egress_ts = meta.pc_egress_ts;
        hdr.postcard.flow_hash = meta.pc_flow_hash;
        hdr.ethernet.ether_type = ETHERTYPE_POSTCARD;
        truncate(POSTCARD_TRUNCATE_BYTES);
    }

    @hidden action postcard_packet_in() {
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = meta.pc_ingress_port;
        hdr.packet_in.reason = PACKET_IN_REASON_POSTCARD;
    }

    apply {
        if (sm.instance_type == INSTANCE_TYPE_EGRESS_CLONE) {
            postcard_build();
            if (sm.egress_port == CPU_PORT) {
                postcard_packet_in();
            }
        } else {
            postcard_clone();
        }
    }
}

#endif
