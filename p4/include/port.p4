// Weft pipeline: ingress port handling, switch-wide configuration, port liveness, L3 admission,
// and packet-out from the controller.
#ifndef WEFT_PORT_P4
#define WEFT_PORT_P4

// Packets the controller sends (P4Runtime packet-out) leave on the port it names, untouched.
control PacketOut(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t sm) {
    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = (port_t)hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            meta.from_cpu = 1;
            exit;
        }
    }
}

control PortIngress(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t sm) {
    @id(ID_PORT_RX_COUNTER)
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_rx_counter;

    // Router MAC of a routed port. Written by the controller (P4RT_TABLE).
    @id(ID_SET_PORT_CONFIG)
    action set_port_config(@format(MAC_ADDRESS) mac_t router_mac) {
        meta.port_configured = 1;
        meta.router_mac = router_mac;
    }

    @id(ID_PORT_NOT_CONFIGURED)
    action port_not_configured() {
        meta.port_configured = 0;
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

    // Switch-wide settings (a keyless table: the plugin modifies its default action).
    //   switch_id          stamped into postcards
    //   postcard_sample_n  postcard for 1 in N forwarded packets; 0 = sampling off
    //   postcard_session   clone session of postcards (to a collector port or the CPU port)
    //   histogram_shift    queue-depth histogram bucket = enq_qdepth >> shift (saturating at 15)
    @id(ID_SET_SWITCH_CONFIG)
    action set_switch_config(bit<32> switch_id,
                             bit<32> postcard_sample_n,
                             bit<32> postcard_session,
                             bit<8> histogram_shift) {
        meta.switch_id = switch_id;
        meta.postcard_sample_n = postcard_sample_n;
        meta.postcard_session = postcard_session;
        meta.histogram_shift = histogram_shift;
    }

    @id(ID_SWITCH_CONFIG_TABLE)
    @weft_owner("plugin", "switch_id = device id")
    table switch_config_table {
        actions = { set_switch_config; }
        default_action = set_switch_config(0, 0, 0, 0);
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
        if (sm.instance_type == INSTANCE_TYPE_RESUBMIT) {
            sm.ingress_port = meta.resubmit_ingress_port;
        }
        // A resubmitted multipath retry is the same packet: count it once.
        if (sm.instance_type == INSTANCE_TYPE_NORMAL) {
            port_rx_counter.count((bit<32>)sm.ingress_port);
        }
        port_config_table.apply();
        switch_config_table.apply();
        port_status_table.apply();
    }
}

// Only IP packets addressed to the router MAC of a configured port are routed.
control L3Admit(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t sm) {
    apply {
        if (meta.port_configured == 0) {
            WEFT_DROP(DROP_REASON_PORT_NOT_CONFIGURED)
        } else if (hdr.ethernet.dst_addr != meta.router_mac) {
            WEFT_DROP(DROP_REASON_ROUTER_MAC_MISMATCH)
        } else if (!hdr.ipv4.isValid() && !hdr.ipv6.isValid()) {
            WEFT_DROP(DROP_REASON_NOT_IP)
        }
    }
}

// The drop-reason counter: one place, at the end of ingress, so every drop is counted once.
control DropStats(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t sm) {
    @id(ID_DROP_REASON_COUNTER)
    counter(DROP_REASON_COUNT, CounterType.packets_and_bytes) drop_reason_counter;

    apply {
        if (meta.drop_reason != DROP_REASON_NONE) {
            drop_reason_counter.count((bit<32>)meta.drop_reason);
        }
    }
}

#endif
