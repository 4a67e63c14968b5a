// Weft pipeline: nexthop rewrite (destination and source MAC, egress port), TTL decrement,
// queue selection, and the liveness check of single-nexthop routes.
#ifndef WEFT_NEXTHOP_P4
#define WEFT_NEXTHOP_P4

control Nexthop(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t sm) {
    // Written by the controller (P4RT_TABLE): the neighbor's MAC, our MAC on that port, the port.
    // Directly attached hosts are nexthops like any other. The egress port must be a routed port
    // (one with a port_config_table entry, whose router MAC src_mac is).
    @id(ID_SET_NEXTHOP)
    action set_nexthop(@refers_to(port_config_table, port) @format(PORT_NAME) port_t egress_port,
                       @format(MAC_ADDRESS) mac_t dst_mac,
                       @format(MAC_ADDRESS) mac_t src_mac) {
        sm.egress_spec = egress_port;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
    }

    @id(ID_NEXTHOP_MISS)
    action nexthop_miss() {
        WEFT_DROP(DROP_REASON_NO_NEXTHOP)
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
        if (meta.drop_reason == DROP_REASON_NONE) {
            if (!PORT_IS_UP(sm.egress_spec)) {
                WEFT_DROP(DROP_REASON_EGRESS_PORT_DOWN)
            } else {
                if (hdr.ipv4.isValid()) {
                    hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
                } else if (hdr.ipv6.isValid()) {
                    hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
                }
                // Routed ports are untagged; the PCP already chose the class.
                if (hdr.vlan.isValid()) {
                    hdr.ethernet.ether_type = hdr.vlan.ether_type;
                    hdr.vlan.setInvalid();
                }
                sm.priority = meta.traffic_class;
            }
        }
    }
}

#endif
