// Weft pipeline: values shared with the control plane that are not in the P4Info.
//
// Every `const bit<W> NAME = VALUE;` line here is turned into a Rust constant by the weft-p4
// generator (p4/src/bin/gen.rs), so the controller and the plugin use these names, never the
// numbers. Keep one declaration per line. Values are part of the contract: never renumber.
#ifndef WEFT_CONSTANTS_P4
#define WEFT_CONSTANTS_P4

// ---- Ports ------------------------------------------------------------------------------------
// BMv2 is started with `--cpu-port 255`: packet-in leaves on it, packet-out arrives on it.
const bit<9> CPU_PORT = 255;

// ---- Clone sessions (P4Runtime PRE CloneSessionEntry, created by the plugin) -----------------
// PFC frames toward port P use clone session PFC_CLONE_SESSION_BASE + P, whose single replica is
// port P. Sessions 1..511 are free for other uses (the postcard session is configured in
// switch_config_table).
const bit<32> PFC_CLONE_SESSION_BASE = 1024;

// ---- Multipath modes (param `mode` of set_multipath_mode) ------------------------------------
const bit<8> MULTIPATH_MODE_HASH = 0;
const bit<8> MULTIPATH_MODE_SPRAY = 1;
const bit<8> MULTIPATH_MODE_ADAPTIVE = 2;
const bit<8> MULTIPATH_MODE_FLOWLET = 3;
// The sender chooses the path: the selector hashes only the UDP source port (the entropy value
// of RoCEv2 and Ultra Ethernet), so every source port keeps one path and a sender that rotates
// its source port sprays its packets.
const bit<8> MULTIPATH_MODE_ENTROPY = 4;

// ---- Drop reasons: index into ingress.drops.drop_reason_counter -------------------------------
const bit<8> DROP_REASON_NONE = 0;
const bit<8> DROP_REASON_PORT_NOT_CONFIGURED = 1;
const bit<8> DROP_REASON_ROUTER_MAC_MISMATCH = 2;
const bit<8> DROP_REASON_NOT_IP = 3;
const bit<8> DROP_REASON_TTL_EXPIRED = 4;
const bit<8> DROP_REASON_NO_ROUTE = 5;
const bit<8> DROP_REASON_ROUTE_DROP = 6;
const bit<8> DROP_REASON_NO_NEXTHOP = 7;
const bit<8> DROP_REASON_NO_LIVE_MEMBER = 8;
const bit<8> DROP_REASON_EGRESS_PORT_DOWN = 9;
const bit<8> DROP_REASON_PFC_WATCHDOG = 10;

// ---- Packet-in reasons (packet_in metadata `reason`) -----------------------------------------
const bit<8> PACKET_IN_REASON_POSTCARD = 1;
// A PFC frame received on `ingress_port`, as it arrived (the frame is the payload: class-enable
// vector and quanta), so the plugin can pause that (port, priority) without waiting for a poll.
const bit<8> PACKET_IN_REASON_PFC = 2;

// ---- Postcard flags (postcard header `flags`) ------------------------------------------------
const bit<8> POSTCARD_FLAG_WATCHED = 1;
const bit<8> POSTCARD_FLAG_SAMPLED = 2;

// ---- Wire constants ---------------------------------------------------------------------------
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_IPV6 = 0x86dd;
const bit<16> ETHERTYPE_VLAN = 0x8100;
const bit<16> ETHERTYPE_MAC_CONTROL = 0x8808;
// IEEE 802 "local experimental" EtherType, used for postcards.
const bit<16> ETHERTYPE_POSTCARD = 0x88b5;
const bit<16> PFC_OPCODE = 0x0101;
const bit<48> PFC_DST_MAC = 0x0180c2000001;
const bit<8> IP_PROTO_TCP = 6;
const bit<8> IP_PROTO_UDP = 17;
const bit<16> UDP_PORT_ROCEV2 = 4791;
const bit<8> POSTCARD_VERSION = 1;

// ---- Internal (not for the control plane) -----------------------------------------------------
// BMv2 simple_switch instance_type values.
#define INSTANCE_TYPE_NORMAL 0
#define INSTANCE_TYPE_EGRESS_CLONE 2
#define INSTANCE_TYPE_RESUBMIT 6
// v1model's drop port: mark_to_drop() sets egress_spec to it; no packet ever enters or leaves
// by it, so the counter cells of port 511 double as "count nowhere" cells (see DropStats).
#define DROP_PORT 511
// clone_preserving_field_list index of the fields a PFC or postcard clone carries.
#define FL_CLONE 1
// resubmit_preserving_field_list index of the multipath retry count.
#define FL_RESUBMIT 2
// A multipath packet that found no live candidate is resubmitted with fresh random samples at
// most this many times before it is dropped (only while the group has no memory of a live
// member, or has none at all).
#define MULTIPATH_MAX_RETRIES 4
#define CLONE_KIND_NONE 0
#define CLONE_KIND_PFC 1
#define CLONE_KIND_POSTCARD 2
#define PSN_EVENT_NONE 2w0
#define PSN_EVENT_OUT_OF_ORDER 2w1
#define PSN_EVENT_REGRESSION 2w2

// meta.switch_cfg (set_switch_config): hash_seed ++ switch_id ++ postcard_sample_n ++
// postcard_session.
#define SWITCH_CFG_POSTCARD_SESSION meta.switch_cfg[31:0]
#define SWITCH_CFG_POSTCARD_SAMPLE_N meta.switch_cfg[63:32]
#define SWITCH_CFG_SWITCH_ID meta.switch_cfg[95:64]
#define SWITCH_CFG_HASH_SEED meta.switch_cfg[127:96]
// meta.multipath_cfg (multipath_mode_table): mode ++ epoch ++ flowlet_gap_us.
#define MULTIPATH_CFG_MODE meta.multipath_cfg[55:48]
#define MULTIPATH_CFG_EPOCH meta.multipath_cfg[47:32]
#define MULTIPATH_CFG_GAP_US meta.multipath_cfg[31:0]
// meta.ecn_cfg (queue_config_table): queue index ++ Kmin ++ Kmax ++ Pmax percent. ECN off:
// Kmin = 0xffffffff, which no queue depth exceeds.
#define ECN_CFG_QUEUE_INDEX meta.ecn_cfg[127:96]
#define ECN_CFG_KMIN meta.ecn_cfg[95:64]
#define ECN_CFG_KMAX meta.ecn_cfg[63:32]
#define ECN_CFG_PMAX meta.ecn_cfg[31:0]
#define ECN_CFG_OFF 128w0x00000000ffffffff0000000000000000

// Port liveness from the plugin's down mask (port_status_table); ports above 255 are not in it.
#define PORT_IS_UP(p) ((p) > 255 || ((meta.port_down_mask >> ((bit<8>)(p))) & 1) == 0)

#endif
