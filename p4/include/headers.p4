// Weft pipeline: wire headers and per-packet metadata.
#ifndef WEFT_HEADERS_P4
#define WEFT_HEADERS_P4

typedef bit<9>  port_t;
typedef bit<48> mac_t;
typedef bit<16> nexthop_id_t;
typedef bit<16> wcmp_group_id_t;
typedef bit<3>  traffic_class_t;

// ---- Controller packet metadata (P4Runtime packet-in / packet-out) -----------------------------
// 16-bit port fields keep the headers byte-aligned without padding fields in the P4Info.
@controller_header("packet_in")
header packet_in_t {
    bit<16> ingress_port;   // port the original packet arrived on
    bit<8>  reason;         // PACKET_IN_REASON_*
}

@controller_header("packet_out")
header packet_out_t {
    bit<16> egress_port;    // sent out of this port as is, no pipeline processing
}

// ---- L2 ----------------------------------------------------------------------------------------
header ethernet_t {
    mac_t   dst_addr;
    mac_t   src_addr;
    bit<16> ether_type;
}

header vlan_t {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> ether_type;
}

// 802.1Qbb priority flow control: MAC control frame, opcode 0x0101.
header pfc_t {
    bit<16> opcode;
    bit<16> class_enable;   // bit i set: time_i applies to priority i
    bit<16> time0;          // pause quanta (512 bit times); 0 = resume
    bit<16> time1;
    bit<16> time2;
    bit<16> time3;
    bit<16> time4;
    bit<16> time5;
    bit<16> time6;
    bit<16> time7;
}

// Zero padding that brings a generated PFC frame to the 60-byte minimum.
header pfc_pad_t {
    bit<208> zeros;
}

// Telemetry postcard, after an Ethernet header with EtherType 0x88b5. The original packet's L3
// and L4 headers follow it (truncated), so the collector sees the 5-tuple.
header postcard_t {
    bit<8>  version;          // POSTCARD_VERSION
    bit<8>  flags;            // POSTCARD_FLAG_*
    bit<16> next_ether_type;  // EtherType of what follows (the original packet's L3)
    bit<32> switch_id;
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<8>  queue;
    bit<8>  reserved;
    bit<16> reserved2;
    bit<32> enq_qdepth;       // packets in the queue when this packet was enqueued
    bit<32> deq_timedelta;    // microseconds spent in the queue
    bit<48> ingress_ts;       // microseconds, switch clock
    bit<48> egress_ts;
    bit<32> flow_hash;
}

// ---- L3 ----------------------------------------------------------------------------------------
header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header ipv6_t {
    bit<4>   version;
    bit<6>   dscp;
    bit<2>   ecn;
    bit<20>  flow_label;
    bit<16>  payload_len;
    bit<8>   next_hdr;
    bit<8>   hop_limit;
    bit<128> src_addr;
    bit<128> dst_addr;
}

// ---- L4 ----------------------------------------------------------------------------------------
header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// RoCEv2 base transport header (InfiniBand BTH), after UDP destination port 4791.
header bth_t {
    bit<8>  opcode;
    bit<1>  solicited_event;
    bit<1>  mig_req;
    bit<2>  pad_count;
    bit<4>  tver;
    bit<16> pkey;
    bit<1>  fecn;
    bit<1>  becn;
    bit<6>  resv6;
    bit<24> dst_qp;
    bit<1>  ack_req;
    bit<7>  resv7;
    bit<24> psn;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    postcard_t   postcard;
    pfc_t        pfc;
    pfc_pad_t    pfc_pad;
    vlan_t       vlan;
    ipv4_t       ipv4;
    ipv6_t       ipv6;
    tcp_t        tcp;
    udp_t        udp;
    bth_t        bth;
}

// ---- Per-packet metadata ----------------------------------------------------------------------
// BMv2 resets every metadata field of every packet (a GMP big-integer write each), and each
// assignment is one primitive: fields are packed where one action fills them together and the
// readers only take slices, and a value used within one action only is a variable of that
// action, not a field here: compile.sh's share_temps.py lets such variables (and p4c's own
// temporaries) of different actions share one field (see p4/README.md, "Packet rate"). Fields tagged
// @field_list(FL_CLONE) survive into the egress clone that becomes a PFC frame or a postcard
// (BMv2 resets all other metadata of a clone); @field_list(FL_RESUBMIT) into a resubmitted pass.
struct local_metadata_t {
    // ingress port and switch (PortIngress)
    mac_t           router_mac;       // of the ingress port; 0 = port not configured
    bit<128>        switch_cfg;       // SWITCH_CFG_*: hash seed, switch id, postcard sampling, session
    bit<PORT_MASK_BITS> port_down_mask;  // bit p set: port p is down (ports < 256)
    bit<PORT_MASK_BITS> watchdog_ports;  // bit p set: pfc_watchdog_table has entries for port p
    bit<6>          dscp;             // set by the parser from IPv4/IPv6
    bit<1>          lossless;         // of the packet's traffic class (= sm.priority)
    bit<8>          drop_reason;      // DROP_REASON_*; 0 = none recorded (see DropStats)
    bit<1>          from_cpu;

    // routing and multipath
    nexthop_id_t    nexthop_id;       // 0 = none (yet)
    wcmp_group_id_t wcmp_group_id;    // 0 = not a multipath route
    bit<56>         multipath_cfg;    // MULTIPATH_CFG_*: mode, epoch, flowlet gap
    bit<32>         flow_hash;        // crc32 of the flow key (multipath, postcards)
    bit<32>         selector_key;
    bit<32>         member;           // 7w0 ++ port ++ nexthop_id: the sample, then the choice
    bit<64>         flowlet_choice;   // group ++ epoch ++ (7w0 ++ port) ++ nexthop_id
    bit<32>         trim;             // TRIM_*: 0, or the trimmed size, queue and DSCP (trim.p4)

    // telemetry (only while a postcard session is set): the flow key, IPv4 zero-extended
    bit<128>        flow_src;
    bit<128>        flow_dst;
    bit<8>          ip_proto;
    bit<16>         l4_dst_port;
    bit<24>         dst_qp;
    bit<8>          postcard_flags;   // 0 = no postcard

    // egress (queue_config_table and what it gates)
    bit<128>        ecn_cfg;          // ECN_CFG_*: queue index, Kmin, Kmax, Pmax
    bit<16>         pfc_event;        // 0, or 1 + the port a PAUSE / RESUME goes to
    bit<32>         psn_slot;
    bit<2>          psn_event;        // PSN_EVENT_*

    // carried into a resubmitted pass (BMv2 does not keep the ingress port of a resubmit)
    @field_list(FL_RESUBMIT) bit<8> multipath_retries;
    @field_list(FL_RESUBMIT) port_t resubmit_ingress_port;

    // carried into egress clones
    @field_list(FL_CLONE) bit<8>   clone_kind;
    @field_list(FL_CLONE) bit<8>   pfc_priority;
    @field_list(FL_CLONE) bit<16>  pfc_quanta;
    @field_list(FL_CLONE) mac_t    pfc_src_mac;
    @field_list(FL_CLONE) bit<8>   pc_flags;
    @field_list(FL_CLONE) bit<32>  pc_switch_id;
    @field_list(FL_CLONE) bit<16>  pc_ingress_port;
    @field_list(FL_CLONE) bit<16>  pc_egress_port;
    @field_list(FL_CLONE) bit<8>   pc_queue;
    @field_list(FL_CLONE) bit<32>  pc_enq_qdepth;
    @field_list(FL_CLONE) bit<32>  pc_deq_timedelta;
    @field_list(FL_CLONE) bit<48>  pc_ingress_ts;
    @field_list(FL_CLONE) bit<48>  pc_egress_ts;
    @field_list(FL_CLONE) bit<32>  pc_flow_hash;
}

#endif
