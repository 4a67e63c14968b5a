// Weft pipeline: longest-prefix-match routing for IPv4 and IPv6 (packets that passed ROUTABLE:
// configured port, router MAC, TTL left). A route resolves to one nexthop or to a multipath
// (WCMP) group.
#ifndef WEFT_ROUTING_P4
#define WEFT_ROUTING_P4

control Routing(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t sm) {
    // A route's nexthop and group must exist while the route does (written before it, deleted
    // after it): the references say so, and the write order follows from them.
    @id(ID_SET_NEXTHOP_ID)
    action set_nexthop_id(@refers_to(nexthop_table, nexthop_id) nexthop_id_t nexthop_id) {
        meta.nexthop_id = nexthop_id;
    }

    // wcmp_group_id 0 is reserved: meta.wcmp_group_id != 0 is what makes a packet multipath.
    @id(ID_SET_WCMP_GROUP_ID)
    action set_wcmp_group_id(@refers_to(wcmp_group_table, wcmp_group_id)
                             wcmp_group_id_t wcmp_group_id) {
        meta.wcmp_group_id = wcmp_group_id;
    }

    // A null route (blackhole), counted as a drop. nexthop_id stays 0, so nothing after routing
    // forwards the packet (nexthop_table's miss keeps this reason).
    @id(ID_DROP_ROUTE)
    action drop_route() {
        meta.drop_reason = DROP_REASON_ROUTE_DROP;
        mark_to_drop(sm);
    }

    @id(ID_ROUTE_MISS)
    action route_miss() {
        meta.drop_reason = DROP_REASON_NO_ROUTE;
        mark_to_drop(sm);
    }

    @id(ID_IPV4_TABLE)
    @weft_owner("controller")
    table ipv4_table {
        key = {
            hdr.ipv4.dst_addr : lpm @name("ipv4_dst") @format(IPV4_ADDRESS);
        }
        actions = {
            set_nexthop_id;
            set_wcmp_group_id;
            drop_route;
            @defaultonly route_miss;
        }
        const default_action = route_miss();
        size = IPV4_TABLE_SIZE;
    }

    @id(ID_IPV6_TABLE)
    @weft_owner("controller")
    table ipv6_table {
        key = {
            hdr.ipv6.dst_addr : lpm @name("ipv6_dst") @format(IPV6_ADDRESS);
        }
        actions = {
            set_nexthop_id;
            set_wcmp_group_id;
            drop_route;
            @defaultonly route_miss;
        }
        const default_action = route_miss();
        size = IPV6_TABLE_SIZE;
    }

    apply {
        if (hdr.ipv4.isValid()) {
            ipv4_table.apply();
        } else {
            ipv6_table.apply();
        }
    }
}

#endif
