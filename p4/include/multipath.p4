// Weft pipeline: multipath groups (WCMP) with per-group mode and fast failover.
//
//   route -> wcmp_group_id
//      │
//      ├─ multipath_mode_table (group, traffic class) -> mode, flowlet gap, epoch
//      │
//      ├─ FLOWLET: flowlet registers (slot = flow hash) hold the member chosen for this flow;
//      │           kept while packets arrive within the gap and the member is live and current
//      │
//      ├─ sample: wcmp_group_table's action selector (weights = member replication by PI)
//      │     HASH:     keyed by the flow hash (5-tuple + BTH destination QP)
//      │     SPRAY, ADAPTIVE, FLOWLET re-pick: keyed by a random number
//      ├─ memory: group_last_choice_reg (DRILL's "last best"), valid only for the same epoch;
//      │          consulted always in ADAPTIVE/FLOWLET, and in HASH/SPRAY when the sample is dead
//      │
//      └─ choose: the live candidate with the smallest queue_depth_reg (ties: the sample);
//                 none live -> resubmit with a fresh random sample (at most
//                 MULTIPATH_MAX_RETRIES times), then drop
//
// One sample plus memory is DRILL(1,1). A second selector sample would need a second table on
// the same action selector, and simple_switch_grpc crashes (std::out_of_range in PI's group
// selection) on a selector shared by two tables: reproduced with a two-table variant of BMv2's
// own action_profile test program.
//
// Liveness is the plugin's port_status_table down mask: a dead member is skipped from the
// next packet on, in every mode, without the controller. Action-profile watch_port pruning
// (by PI, from BMv2's port poll) and the plugin's member pruning are only second lines.
#ifndef WEFT_MULTIPATH_P4
#define WEFT_MULTIPATH_P4

control Multipath(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t sm) {
    FlowKey() flow_key;

    // Packets sent through each nexthop by a multipath group: the path spread.
    @id(ID_MULTIPATH_MEMBER_COUNTER)
    counter(NEXTHOP_TABLE_SIZE, CounterType.packets_and_bytes) multipath_member_counter;

    // Per group: the member chosen last, epoch ++ port ++ nexthop_id (16 bits each).
    @id(ID_GROUP_LAST_CHOICE_REG)
    register<bit<48>>(WCMP_GROUP_TABLE_SIZE) group_last_choice_reg;

    // Per flowlet slot: the time (us) the slot last saw a packet, and the member it uses,
    // group ++ epoch ++ port ++ nexthop_id (16 bits each).
    @id(ID_FLOWLET_TIME_REG)
    register<bit<48>>(FLOWLET_SLOTS) flowlet_time_reg;
    @id(ID_FLOWLET_CHOICE_REG)
    register<bit<64>>(FLOWLET_SLOTS) flowlet_choice_reg;

    // Mode of a group for a traffic class (ternary: one wildcard entry covers all classes).
    //   mode            MULTIPATH_MODE_{HASH,SPRAY,ADAPTIVE,FLOWLET}
    //   flowlet_gap_us  FLOWLET: idle time after which a flow may move
    //   epoch           changes whenever the group's member set changes, so memories of a
    //                   removed member (last choice, flowlets) are ignored at once
    @id(ID_SET_MULTIPATH_MODE)
    action set_multipath_mode(bit<8> mode, bit<32> flowlet_gap_us, bit<16> epoch) {
        meta.multipath_mode = mode;
        meta.flowlet_gap_us = flowlet_gap_us;
        meta.group_epoch = epoch;
    }

    @id(ID_MULTIPATH_MODE_DEFAULT)
    action multipath_mode_default() {
        meta.multipath_mode = MULTIPATH_MODE_HASH;
        meta.flowlet_gap_us = 0;
        meta.group_epoch = 0;
    }

    // Keyed by an existing group: the group's entries are written first, and a route to the
    // group comes after its modes (see p4/README.md, "Write order").
    @id(ID_MULTIPATH_MODE_TABLE)
    @weft_owner("controller")
    table multipath_mode_table {
        key = {
            meta.wcmp_group_id : exact @name("wcmp_group_id")
                @refers_to(wcmp_group_table, wcmp_group_id);
            meta.traffic_class : ternary @name("traffic_class");
        }
        actions = {
            set_multipath_mode;
            @defaultonly multipath_mode_default;
        }
        const default_action = multipath_mode_default();
        size = MULTIPATH_MODE_TABLE_SIZE;
    }

    // A group member: the nexthop and its egress port (the port whose liveness and queue depth
    // decide; it must be the nexthop's port, and is also the member's P4Runtime watch_port).
    @id(ID_SET_WCMP_MEMBER)
    action set_wcmp_member(@refers_to(nexthop_table, nexthop_id) nexthop_id_t nexthop_id,
                           @refers_to(port_config_table, port) @format(PORT_NAME)
                           port_t egress_port) {
        meta.member_hit = 1;
        meta.member_nexthop_id = nexthop_id;
        meta.member_port = egress_port;
    }

    // No entry for the group, or an empty group.
    @id(ID_WCMP_NO_MEMBER)
    action wcmp_no_member() {
        meta.member_hit = 0;
    }

    @id(ID_WCMP_GROUP_SELECTOR)
    @max_group_size(WCMP_MAX_GROUP_SIZE)
    action_selector(HashAlgorithm.crc16, WCMP_SELECTOR_SIZE, 16) wcmp_group_selector;

    @id(ID_WCMP_GROUP_TABLE)
    @weft_owner("controller")
    table wcmp_group_table {
        key = {
            meta.wcmp_group_id : exact @name("wcmp_group_id");
            meta.selector_key : selector;
        }
        actions = {
            set_wcmp_member;
            @defaultonly wcmp_no_member;
        }
        const default_action = wcmp_no_member();
        implementation = wcmp_group_selector;
        size = WCMP_GROUP_TABLE_SIZE;
    }

    apply {
        flow_key.apply(hdr, meta, sm);
        COMPUTE_FLOW_HASH
        multipath_mode_table.apply();

        bit<1> chosen = 0;
        nexthop_id_t choice_nexthop = 0;
        port_t choice_port = 0;
        bit<32> flowlet_slot = meta.flow_hash & (FLOWLET_SLOTS - 1);

        if (meta.multipath_mode == MULTIPATH_MODE_FLOWLET) {
            bit<48> last_seen;
            bit<64> flowlet;
            flowlet_time_reg.read(last_seen, flowlet_slot);
            flowlet_choice_reg.read(flowlet, flowlet_slot);
            flowlet_time_reg.write(flowlet_slot, sm.ingress_global_timestamp);
            port_t flowlet_port = flowlet[24:16];
            if (sm.ingress_global_timestamp - last_seen < (bit<48>)meta.flowlet_gap_us
                    && flowlet[63:48] == meta.wcmp_group_id
                    && flowlet[47:32] == meta.group_epoch
                    && flowlet[15:0] != 0
                    && PORT_IS_UP(flowlet_port)) {
                chosen = 1;
                choice_nexthop = flowlet[15:0];
                choice_port = flowlet_port;
            }
        }

        if (chosen == 0) {
            // The sample. A retry draws a random one: the flow's hash already failed.
            if (meta.multipath_mode == MULTIPATH_MODE_HASH && meta.multipath_retries == 0) {
                meta.selector_key = meta.flow_hash;
            } else {
                random(meta.selector_key, 32w0, 32w0xffffff);
            }
            meta.member_hit = 0;
            wcmp_group_table.apply();
            bit<1> sample_live = 0;
            if (meta.member_hit == 1 && PORT_IS_UP(meta.member_port)) {
                sample_live = 1;
                chosen = 1;
                choice_nexthop = meta.member_nexthop_id;
                choice_port = meta.member_port;
            }

            if (meta.multipath_mode >= MULTIPATH_MODE_ADAPTIVE || sample_live == 0) {
                bit<32> choice_depth = 0;
                if (chosen == 1) {
                    queue_depth_reg.read(choice_depth, (bit<32>)choice_port);
                }
                // Memory: the group's last choice, if it is still a member and live.
                bit<48> last;
                group_last_choice_reg.read(last, (bit<32>)meta.wcmp_group_id);
                port_t last_port = last[24:16];
                if (last[15:0] != 0 && last[47:32] == meta.group_epoch && PORT_IS_UP(last_port)) {
                    bit<32> last_depth;
                    queue_depth_reg.read(last_depth, (bit<32>)last_port);
                    if (chosen == 0 || last_depth < choice_depth) {
                        chosen = 1;
                        choice_nexthop = last[15:0];
                        choice_port = last_port;
                    }
                }
            }

            if (chosen == 1) {
                group_last_choice_reg.write((bit<32>)meta.wcmp_group_id,
                                            meta.group_epoch ++ (7w0 ++ choice_port) ++ choice_nexthop);
                if (meta.multipath_mode == MULTIPATH_MODE_FLOWLET) {
                    flowlet_choice_reg.write(flowlet_slot,
                                             meta.wcmp_group_id ++ meta.group_epoch
                                             ++ (7w0 ++ choice_port) ++ choice_nexthop);
                }
            }
        }

        if (chosen == 1) {
            meta.nexthop_id = choice_nexthop;
            multipath_member_counter.count((bit<32>)choice_nexthop);
        } else if (meta.multipath_retries < MULTIPATH_MAX_RETRIES) {
            // Both samples dead and no live memory (a group that has not carried traffic since
            // its epoch changed): try again with fresh samples rather than drop.
            meta.multipath_retries = meta.multipath_retries + 1;
            meta.resubmit_ingress_port = sm.ingress_port;
            resubmit_preserving_field_list(FL_RESUBMIT);
            mark_to_drop(sm);
            exit;
        } else {
            WEFT_DROP(DROP_REASON_NO_LIVE_MEMBER)
        }
    }
}

#endif
