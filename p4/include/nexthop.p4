// Weft pipeline: nexthop rewrite (destination and source MAC, egress port), TTL decrement, and
// the liveness check of the egress port.
#ifndef WEFT_NEXTHOP_P4
#define WEFT_NEXTHOP_P4

control Nexthop(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t sm) {
    // Written by the controller (P4RT_TABLE): the neighbor's MAC, our MAC on that port, the port.
    // Directly attached hosts are nexthops like any other. The egress port must be a routed port
    // (one with a port_config_table entry, whose router MAC src_mac is).
    //
    // Both TTL fields are decremented: the one of the header that is not valid is not sent (an
    // unconditional assignment costs BMv2 less than a condition that picks one). An egress port
    // the down mask marks down drops the packet (DropStats counts it as
    // DROP_REASON_EGRESS_PORT_DOWN). The queue is sm.priority, set by classification.
    @id(ID_SET_NEXTHOP)
    action set_nexthop(@refers_to(port_config_table, port) @format(PORT_NAME) port_t egress_port,
                       @format(MAC_ADDRESS) mac_t dst_mac,
                       @format(MAC_ADDRESS) mac_t src_mac) {
        sm.egress_spec = PORT_IS_UP(egress_port) ? egress_port : (port_t)DROP_PORT;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
    }

    // Also reached by packets already dropped (no route, no live member: nexthop_id 0), whose
    // reason it keeps.
    @id(ID_NEXTHOP_MISS)
    action nexthop_miss() {
        meta.drop_reason = meta.drop_reason == DROP_REASON_NONE ? DROP_REASON_NO_NEXTHOP
                                                                : meta.drop_reason;
        mark_to_drop(sm);
    }

    @id(ID_NEXTHOP_TABLE)
    @weft_owner("controller")
    table nexthop_table {
        key = {
            meta.nexthop_id : exact @name("nexthop_id");
        }
        actions = {
            set_nexthop;
            @defaultonly nexthop_miss;
        }
        const default_action = nexthop_miss();
        size = NEXTHOP_TABLE_SIZE;
    }

    apply {
        nexthop_table.apply();
    }
}

#endif
