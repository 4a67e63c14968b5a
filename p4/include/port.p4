// Weft pipeline: ingress port handling, switch-wide configuration (with DSCP classification),
// port liveness, L3 admission, packet-out from the controller, and the drop counter.
#ifndef WEFT_PORT_P4
#define WEFT_PORT_P4

// Packets the controller sends (P4Runtime packet-out) leave on the port it names, untouched.
control PacketOut(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t sm) {
    @hidden action packet_out_forward() {
        sm.egress_spec = (port_t)hdr.packet_out.egress_port;
        sm.priority = 0;
        hdr.packet_out.setInvalid();
        meta.from_cpu = 1;
        exit;
    }

    apply {
        packet_out_forward();
    }
}

// Received packets per ingress port: counted once per packet (a resubmitted multipath retry is
// the same packet, and packet-out from the CPU port is not received traffic). Uncounted packets
// go to the cell of DROP_PORT, which no packet ever arrives on.
#define RX_COUNT(countable) \
    port_rx_counter.count((countable) ? (bit<32>)sm.ingress_port : (bit<32>)DROP_PORT);

control PortIngress(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t sm) {
    @id(ID_PORT_RX_COUNTER)
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_rx_counter;

    // Router MAC of a routed port. Written by the controller (P4RT_TABLE).
    @id(ID_SET_PORT_CONFIG)
    action set_port_config(@format(MAC_ADDRESS) mac_t router_mac) {
        RX_COUNT(meta.multipath_retries == 0)
        meta.router_mac = router_mac;
    }

    // router_mac stays 0: L3Admit drops the packet as DROP_REASON_PORT_NOT_CONFIGURED.
    @id(ID_PORT_NOT_CONFIGURED)
    action port_not_configured() {
        RX_COUNT(meta.multipath_retries == 0 && !hdr.packet_out.isValid())
    }

    @id(ID_PORT_CONFIG_TABLE)
    @weft_owner("controller")
    table port_config_table {
        key = {
            sm.ingress_port : exact @name("port") @format(PORT_NAME);
        }
        actions = {
            set_port_config;
            @defaultonly port_not_configured;
        }
        const default_action = port_not_configured();
        size = PORT_CONFIG_TABLE_SIZE;
    }

    // Switch-wide settings (a keyless table: the plugin modifies its default action). Applied
    // to every packet, so everything switch-wide the fast path needs is here, in one action:
    //   switch_id          stamped into postcards
    //   postcard_sample_n  postcard for 1 in N forwarded packets; 0 = sampling off
    //   postcard_session   clone session of postcards (to a collector port or the CPU port);
    //                      0 = postcards off (the postcard watch lookup is skipped)
    //   hash_seed          this switch's multipath hash seed (see Multipath): HASH mode selects
    //                      by crc16(flow_hash * (hash_seed | 1)); 0 = the unseeded hash
    //   dscp_class_map     DSCP classification (QOS_CLASSIFY in qos.p4): 4 bits per DSCP d at
    //                      bits 4d+3..4d, lossless << 3 | traffic class
    //   dscp_mapped        bit d set: DSCP d is in the map; otherwise the class stays the 802.1Q
    //                      PCP (0 if untagged) and the packet is lossy
    //   watchdog_ports     bit p set: pfc_watchdog_table has entries for egress port p (ports
    //                      < 256), so only those packets pay its lookup (ports above 255 always do)
    @id(ID_SET_SWITCH_CONFIG)
    action set_switch_config(bit<32> switch_id,
                             bit<32> postcard_sample_n,
                             bit<32> postcard_session,
                             bit<32> hash_seed,
                             bit<256> dscp_class_map,
                             bit<64> dscp_mapped,
                             bit<PORT_MASK_BITS> watchdog_ports) {
        meta.switch_cfg = hash_seed ++ switch_id ++ postcard_sample_n ++ postcard_session;
        QOS_CLASSIFY(dscp_class_map, dscp_mapped)
        meta.watchdog_ports = watchdog_ports;
    }

    @id(ID_SWITCH_CONFIG_TABLE)
    @weft_owner("plugin", "switch settings, DSCP classification and watchdog ports from CONFIG_DB and the device id")
    table switch_config_table {
        actions = { set_switch_config; }
        default_action = set_switch_config(0, 0, 0, 0, 0, 0, 0);
        size = 1;
    }

    // Port liveness: bit p of down_mask set = port p is down. The plugin writes it from netlink
    // link events, so every multipath mode skips a dead member within one P4Runtime write,
    // without the controller and without BMv2's 200 ms port poll. All ports are up by default.
    @id(ID_SET_PORT_DOWN_MASK)
    action set_port_down_mask(bit<PORT_MASK_BITS> down_mask) {
        meta.port_down_mask = down_mask;
    }

    @id(ID_PORT_STATUS_TABLE)
    @weft_owner("plugin", "port down mask from link state")
    table port_status_table {
        actions = { set_port_down_mask; }
        default_action = set_port_down_mask(0);
        size = 1;
    }

    apply {
        port_config_table.apply();
        switch_config_table.apply();
        port_status_table.apply();
    }
}

// Only IP packets addressed to the router MAC of a configured port, with TTL left, are routed
// (the fast path's one condition, ROUTABLE); this drops the rest with the first reason that
// applies.
#define ROUTABLE (meta.router_mac != 0 && hdr.ethernet.dst_addr == meta.router_mac           \
                  && ((hdr.ipv4.isValid() && hdr.ipv4.ttl > 1)                               \
                      || (hdr.ipv6.isValid() && hdr.ipv6.hop_limit > 1)))

control L3Admit(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t sm) {
    @hidden action admit_drop() {
        meta.drop_reason =
              (meta.router_mac == 0 ? DROP_REASON_PORT_NOT_CONFIGURED : DROP_REASON_NONE)
            | (meta.router_mac != 0 && hdr.ethernet.dst_addr != meta.router_mac
               ? DROP_REASON_ROUTER_MAC_MISMATCH : DROP_REASON_NONE)
            | (meta.router_mac != 0 && hdr.ethernet.dst_addr == meta.router_mac
               && !hdr.ipv4.isValid() && !hdr.ipv6.isValid()
               ? DROP_REASON_NOT_IP : DROP_REASON_NONE)
            | (meta.router_mac != 0 && hdr.ethernet.dst_addr == meta.router_mac
               && (hdr.ipv4.isValid() || hdr.ipv6.isValid())
               ? DROP_REASON_TTL_EXPIRED : DROP_REASON_NONE);
        mark_to_drop(sm);
    }

    apply {
        admit_drop();
    }
}

// The drop-reason counter, at the end of ingress: every dropped packet reaches it with
// egress_spec = DROP_PORT and is counted once. Drops record their reason in meta.drop_reason,
// the first one winning; the one drop that records none is set_nexthop's egress port down
// (its liveness check is folded into egress_spec to save a primitive per packet).
control DropStats(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t sm) {
    @id(ID_DROP_REASON_COUNTER)
    counter(DROP_REASON_COUNT, CounterType.packets_and_bytes) drop_reason_counter;

    @hidden action count_drop() {
        drop_reason_counter.count(meta.drop_reason == DROP_REASON_NONE
                                  ? (bit<32>)DROP_REASON_EGRESS_PORT_DOWN
                                  : (bit<32>)meta.drop_reason);
    }

    apply {
        count_drop();
    }
}

#endif
