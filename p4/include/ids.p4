// Weft pipeline: the stable P4Runtime id of every table, action, counter, register and action
// profile.
//
// Rules:
//   * An id, once released, is NEVER reused, not even after the object is deleted: a controller
//     or plugin built against an older P4Info must never meet a different object under an old id.
//     Retire an id by leaving its line here, commented out with the date and reason.
//   * New objects take the "next free" id of their kind; bump the note.
//   * The 8-bit prefix is the P4Runtime resource type (p4c checks it).
//
// Next free ids:
//   table 0x02000012, action 0x01000021, action profile 0x11000002, counter 0x1200000f,
//   direct counter 0x13000002, register 0x1600000a
#ifndef WEFT_IDS_P4
#define WEFT_IDS_P4

// ---- Tables (0x02) ----------------------------------------------------------------------------
#define ID_PORT_CONFIG_TABLE         0x02000001
#define ID_SWITCH_CONFIG_TABLE       0x02000002
#define ID_PORT_STATUS_TABLE         0x02000003
// 0x02000004 retired 2026-12-01: qos_classify_table (DSCP classification is a map in
// set_switch_config: a table hit per packet cost more than the rest of classification).
#define ID_IPV4_TABLE                0x02000005
#define ID_IPV6_TABLE                0x02000006
#define ID_MULTIPATH_MODE_TABLE      0x02000007
#define ID_WCMP_GROUP_TABLE          0x02000008
// 0x02000009 retired 2026-11-29: wcmp_group_alt_table (a selector shared by two tables crashes
// simple_switch_grpc). Never reuse.
#define ID_NEXTHOP_TABLE             0x0200000a
#define ID_PFC_WATCHDOG_TABLE        0x0200000b
#define ID_POSTCARD_WATCH_TABLE      0x0200000c
// 0x0200000d retired 2026-12-01: ecn_threshold_table, and 0x0200000e: pfc_threshold_table (both
// merged into queue_config_table, keyed the same way). Never reuse.
#define ID_PSN_TRACKING_TABLE        0x0200000f
#define ID_QUEUE_CONFIG_TABLE        0x02000010
#define ID_TRIM_CONFIG_TABLE         0x02000011

// ---- Actions (0x01) ---------------------------------------------------------------------------
#define ID_SET_PORT_CONFIG           0x01000001
#define ID_PORT_NOT_CONFIGURED       0x01000002
// 0x01000003 retired 2026-12-01: set_switch_config(switch_id, postcard_sample_n,
// postcard_session, histogram_shift); its successor has other parameters (ID_SET_SWITCH_CONFIG).
#define ID_SET_PORT_DOWN_MASK        0x01000004
// 0x01000005 retired 2026-12-01: set_traffic_class; 0x01000006: qos_default.
#define ID_SET_NEXTHOP_ID            0x01000007
#define ID_SET_WCMP_GROUP_ID         0x01000008
#define ID_DROP_ROUTE                0x01000009
#define ID_ROUTE_MISS                0x0100000a
#define ID_SET_MULTIPATH_MODE        0x0100000b
#define ID_MULTIPATH_MODE_DEFAULT    0x0100000c
#define ID_SET_WCMP_MEMBER           0x0100000d
#define ID_WCMP_NO_MEMBER            0x0100000e
#define ID_SET_NEXTHOP               0x0100000f
#define ID_NEXTHOP_MISS              0x01000010
#define ID_PFC_WATCHDOG_DROP         0x01000011
#define ID_PFC_WATCHDOG_FORWARD      0x01000012
#define ID_PFC_WATCHDOG_NONE         0x01000013
#define ID_WATCH_POSTCARD            0x01000014
#define ID_POSTCARD_WATCH_MISS       0x01000015
// 0x01000016..0x01000019 retired 2026-12-01: set_ecn_thresholds, ecn_disabled,
// set_pfc_thresholds, pfc_disabled (queue_config_table's actions replace them).
#define ID_ENABLE_PSN_TRACKING       0x0100001a
#define ID_PSN_TRACKING_DISABLED     0x0100001b
#define ID_SET_SWITCH_CONFIG         0x0100001c
#define ID_SET_QUEUE_CONFIG          0x0100001d
#define ID_SET_QUEUE_CONFIG_PFC      0x0100001e
#define ID_QUEUE_CONFIG_DEFAULT      0x0100001f
#define ID_SET_TRIM_CONFIG           0x01000020

// ---- Action profiles (0x11) -------------------------------------------------------------------
#define ID_WCMP_GROUP_SELECTOR       0x11000001

// ---- Indexed counters (0x12) ------------------------------------------------------------------
#define ID_PORT_RX_COUNTER           0x12000001
#define ID_PORT_TX_COUNTER           0x12000002
#define ID_DROP_REASON_COUNTER       0x12000003
#define ID_ECN_MARK_COUNTER          0x12000004
#define ID_PFC_RX_PAUSE_COUNTER      0x12000005
#define ID_PFC_RX_RESUME_COUNTER     0x12000006
#define ID_PFC_TX_PAUSE_COUNTER      0x12000007
#define ID_PFC_TX_RESUME_COUNTER     0x12000008
#define ID_MULTIPATH_MEMBER_COUNTER  0x12000009
#define ID_PSN_OUT_OF_ORDER_COUNTER  0x1200000a
#define ID_PSN_REGRESSION_COUNTER    0x1200000b
#define ID_QUEUE_DEPTH_HISTOGRAM     0x1200000c
#define ID_QUEUE_TX_COUNTER          0x1200000d
#define ID_TRIM_COUNTER              0x1200000e

// ---- Direct counters (0x13) -------------------------------------------------------------------
#define ID_PFC_WATCHDOG_COUNTER      0x13000001

// ---- Registers (0x16): data-plane state only, BMv2 P4Runtime cannot read or write them (the
// plugin writes pfc_hold_reg over BMv2's Thrift API) -------------------------------------------
// 0x16000001 retired 2026-12-01: queue_depth_reg as bit<32> (now bit<19>, the width of
// deq_qdepth: ID_QUEUE_DEPTH_REG).
#define ID_GROUP_LAST_CHOICE_REG     0x16000002
#define ID_FLOWLET_TIME_REG          0x16000003
#define ID_FLOWLET_CHOICE_REG        0x16000004
#define ID_PFC_STATE_REG             0x16000005
#define ID_PSN_EXPECTED_REG          0x16000006
#define ID_QUEUE_DEPTH_REG           0x16000007
#define ID_PFC_HOLD_REG              0x16000008
#define ID_QUEUE_CLASS_DEPTH_REG     0x16000009

// Controller packet metadata (packet_in, packet_out) has no @id: p4c 1.2.4 rejects the 0x81
// prefix there and derives the id from the name, which is stable as long as the name is.

#endif
