// Weft pipeline: QoS classification. DSCP -> traffic class (= sm.priority = BMv2 priority queue
// = PFC priority) and whether the class is lossless (PFC-protected).
//
// The map is switch-wide (SONiC's DSCP_TO_TC_MAP with PORT_QOS_MAP pfc_enable) and small (64
// DSCPs × 4 bits), so it is not a table: it travels as parameters of switch_config_table's
// default action, which every packet applies anyway, and is read with two shifts. A table hit
// costs BMv2 more than everything else classification does (see p4/README.md, "Packet rate").
//
//   dscp_class_map  bits 4d+3..4d: lossless << 3 | traffic class of DSCP d
//   dscp_mapped     bit d: DSCP d is mapped; unmapped DSCPs keep the class the parser took from
//                   the 802.1Q PCP (0 if untagged) and are lossy (their lossless bit is 0)
//
// meta.dscp is set by the parser (IPv4 and IPv6); non-IP packets classify as DSCP 0 and never
// reach a queue.
#ifndef WEFT_QOS_P4
#define WEFT_QOS_P4

#define QOS_CLASSIFY(dscp_class_map, dscp_mapped)                                              \
    sm.priority = ((dscp_mapped >> meta.dscp) & 1) == 1                                      \
        ? (bit<3>)(dscp_class_map >> ((bit<8>)meta.dscp << 2)) : sm.priority;               \
    meta.lossless = (bit<1>)(dscp_class_map >> (((bit<8>)meta.dscp << 2) + 3));

#endif
