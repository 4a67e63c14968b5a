// Weft pipeline: multipath groups (WCMP) with per-group mode, a per-switch hash seed and fast
// failover.
//
//   route -> wcmp_group_id
//      │
//      ├─ multipath_mode_table (group, traffic class) -> mode, flowlet gap, epoch; the flow
//      │     hash; the selector key:
//      │     HASH:     flow_hash * (hash_seed | 1)   (the switch's seed: see below)
//      │     ENTROPY:  UDP source port * (hash_seed | 1): the sender picks the path by its
//      │               source port (RoCEv2's and Ultra Ethernet's entropy value), nothing else
//      │               of the packet counts
//      │     SPRAY, ADAPTIVE, FLOWLET, and every retry: a random number
//      │
//      ├─ FLOWLET: flowlet registers (slot = flow hash) hold the member chosen for this flow;
//      │           kept while packets arrive within the gap and the member is live and current
//      │
//      ├─ sample: wcmp_group_table's action selector (weights = member replication by PI);
//      │     HASH/SPRAY/ENTROPY with a live sample: chosen in the member action, done
//      │
//      ├─ otherwise (ADAPTIVE, FLOWLET re-pick, a dead or missing sample, a retry):
//      │     memory: group_last_choice_reg (DRILL's "last best"), valid only for the same epoch;
//      │     consulted always in ADAPTIVE/FLOWLET, and in HASH/SPRAY/ENTROPY when the sample
//      │     is dead
//      │     choose: the live candidate with the smallest queue_depth_reg (ties: the sample),
//      │     which becomes the memory
//      │
//      └─ none live -> resubmit with a fresh random sample (at most MULTIPATH_MAX_RETRIES
//                      times), then drop
//
// The hash seed. Every switch hashing the same key with the same function makes correlated
// choices hop after hop: in a three-tier fat-tree a spine then sends everything a leaf gave it
// to one of its k/2 core uplinks (ECMP polarisation, found by weft-simulate). Both CRCs are
// affine over GF(2), so a seed XORed into the key or the hash only permutes the members and
// keeps the correlation; multiplying by an odd number is not affine, so crc16 of flow_hash ×
// (seed | 1) picks members independently of another seed's picks. Seed 0 is the unseeded hash.
// The plugin sets the seed from the switch's device id (weft_p4::hash_seed).
//
// One sample plus memory is DRILL(1,1). A second selector sample would need a second table on
// the same action selector, and simple_switch_grpc crashes (std::out_of_range in PI's group
// selection) on a selector shared by two tables: reproduced with a two-table variant of BMv2's
// own action_profile test program.
//
// Liveness is the plugin's port_status_table down mask: a dead member is skipped from the
// next packet on, in every mode, without the controller. Action-profile watch_port pruning
// (by PI, from BMv2's port poll) and the plugin's member pruning are only second lines.
//
// Every choice sets meta.nexthop_id (0 until then) and counts multipath_member_counter at it.
// An action cannot run an extern conditionally, so the counting actions count cell 0 when they
// chose nothing (nexthop id 0 is reserved: the cell means nothing).
#ifndef WEFT_MULTIPATH_P4
#define WEFT_MULTIPATH_P4

// The mode table's actions: mode, epoch and gap in one field, the flow hash, the selector key.
#define MULTIPATH_SET_MODE(mode, gap_us, epoch)                                                \
    meta.multipath_cfg = mode ++ epoch ++ gap_us;                                             \
    FLOW_HASH                                                                                 \
    random(meta.selector_key, 32w0, 32w0xffffff);                                             \
    meta.selector_key = ((mode == MULTIPATH_MODE_HASH || mode == MULTIPATH_MODE_ENTROPY)      \
                         && meta.multipath_retries == 0)                                      \
        ? ((mode == MULTIPATH_MODE_ENTROPY ? (bit<32>)hdr.udp.src_port : 32w0)                \
           | (mode == MULTIPATH_MODE_HASH ? meta.flow_hash : 32w0))                           \
          * (SWITCH_CFG_HASH_SEED | 32w1)                                                     \
        : meta.selector_key;

control Multipath(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t sm) {
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
    //   mode            MULTIPATH_MODE_{HASH,SPRAY,ADAPTIVE,FLOWLET,ENTROPY}
    //   flowlet_gap_us  FLOWLET: idle time after which a flow may move
    //   epoch           changes whenever the group's member set changes, so memories of a
    //                   removed member (last choice, flowlets) are ignored at once
    @id(ID_SET_MULTIPATH_MODE)
    action set_multipath_mode(bit<8> mode, bit<32> flowlet_gap_us, bit<16> epoch) {
        MULTIPATH_SET_MODE(mode, flowlet_gap_us, epoch)
    }

    @id(ID_MULTIPATH_MODE_DEFAULT)
    action multipath_mode_default() {
        MULTIPATH_SET_MODE(MULTIPATH_MODE_HASH, 32w0, 16w0)
    }

    // Keyed by an existing group: the group's entries are written first, and a route to the
    // group comes after its modes (see p4/README.md, "Write order").
    @id(ID_MULTIPATH_MODE_TABLE)
    @weft_owner("controller")
    table multipath_mode_table {
        key = {
            meta.wcmp_group_id : exact @name("wcmp_group_id")
                @refers_to(wcmp_group_table, wcmp_group_id);
            sm.priority : ternary @name("traffic_class");
        }
        actions = {
            set_multipath_mode;
            @defaultonly multipath_mode_default;
        }
        const default_action = multipath_mode_default();
        size = MULTIPATH_MODE_TABLE_SIZE;
    }

    // FLOWLET, first pass: the flow's remembered member, if its last packet came within the
    // gap and the member is of the same group and epoch and live.
    @hidden action flowlet_lookup() {
        bit<48> seen;
        flowlet_time_reg.read(seen, meta.flow_hash & (FLOWLET_SLOTS - 1));
        flowlet_choice_reg.read(meta.flowlet_choice, meta.flow_hash & (FLOWLET_SLOTS - 1));
        flowlet_time_reg.write(meta.flow_hash & (FLOWLET_SLOTS - 1), sm.ingress_global_timestamp);
        meta.nexthop_id = (sm.ingress_global_timestamp - seen
                               < (bit<48>)MULTIPATH_CFG_GAP_US
                           && meta.flowlet_choice[63:48] == meta.wcmp_group_id
                           && meta.flowlet_choice[47:32] == MULTIPATH_CFG_EPOCH
                           && PORT_IS_UP(meta.flowlet_choice[24:16]))
            ? meta.flowlet_choice[15:0] : 16w0;
        multipath_member_counter.count((bit<32>)meta.nexthop_id);
    }

    // A group member: the nexthop and its egress port (the port whose liveness and queue depth
    // decide; it must be the nexthop's port, and is also the member's P4Runtime watch_port).
    // HASH, SPRAY and ENTROPY take a live sample here (the fast path); the rest goes on to the
    // choice.
    @id(ID_SET_WCMP_MEMBER)
    action set_wcmp_member(@refers_to(nexthop_table, nexthop_id) nexthop_id_t nexthop_id,
                           @refers_to(port_config_table, port) @format(PORT_NAME)
                           port_t egress_port) {
        meta.member = 7w0 ++ egress_port ++ nexthop_id;
        meta.nexthop_id = ((MULTIPATH_CFG_MODE <= MULTIPATH_MODE_SPRAY
                            || MULTIPATH_CFG_MODE == MULTIPATH_MODE_ENTROPY)
                           && meta.multipath_retries == 0 && PORT_IS_UP(egress_port))
            ? nexthop_id : 16w0;
        multipath_member_counter.count((bit<32>)meta.nexthop_id);
    }

    // No entry for the group, or an empty group: meta.member stays 0 (no sample).
    @id(ID_WCMP_NO_MEMBER)
    action wcmp_no_member() { }

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

    // The full choice between the sample and the group's memory (see the top of this file).
    // The memory is written with the choice (rewritten unchanged when nothing was chosen).
    @hidden action multipath_choose() {
        bit<19> sample_depth;
        bit<48> last_choice;        // epoch ++ (7w0 ++ port) ++ nexthop_id
        bit<19> last_depth;
        bit<1> sample_live;
        bit<1> take_last;
        queue_depth_reg.read(sample_depth, (bit<32>)meta.member[24:16]);
        group_last_choice_reg.read(last_choice, (bit<32>)meta.wcmp_group_id);
        queue_depth_reg.read(last_depth, (bit<32>)last_choice[24:16]);
        sample_live = (meta.member[15:0] != 0 && PORT_IS_UP(meta.member[24:16])) ? 1w1 : 0;
        take_last = (last_choice[15:0] != 0
                          && last_choice[47:32] == MULTIPATH_CFG_EPOCH
                          && PORT_IS_UP(last_choice[24:16])
                          && (sample_live == 0
                              || ((MULTIPATH_CFG_MODE == MULTIPATH_MODE_ADAPTIVE
                                   || MULTIPATH_CFG_MODE == MULTIPATH_MODE_FLOWLET)
                                  && last_depth < sample_depth)))
            ? 1w1 : 0;
        meta.member = (take_last == 1 ? last_choice[31:0] : 32w0)
                    | (take_last == 0 && sample_live == 1 ? meta.member : 32w0);
        meta.nexthop_id = meta.member[15:0];
        // last_choice becomes the value written back.
        last_choice = meta.member != 0 ? MULTIPATH_CFG_EPOCH ++ meta.member
                                            : last_choice;
        group_last_choice_reg.write((bit<32>)meta.wcmp_group_id, last_choice);
        multipath_member_counter.count((bit<32>)meta.nexthop_id);
    }

    // FLOWLET: remember the new choice for the flow.
    @hidden action flowlet_remember() {
        meta.flowlet_choice = meta.wcmp_group_id ++ MULTIPATH_CFG_EPOCH ++ meta.member;
        flowlet_choice_reg.write(meta.flow_hash & (FLOWLET_SLOTS - 1), meta.flowlet_choice);
    }

    // No live candidate (a group that has not carried traffic since its epoch changed, or
    // whose members are all down): try again with a fresh random sample rather than drop.
    @hidden action multipath_retry() {
        meta.multipath_retries = meta.multipath_retries + 1;
        meta.resubmit_ingress_port = sm.ingress_port;
        resubmit_preserving_field_list(FL_RESUBMIT);
        mark_to_drop(sm);
        exit;
    }

    @hidden action multipath_no_live_member() {
        meta.drop_reason = DROP_REASON_NO_LIVE_MEMBER;
        mark_to_drop(sm);
    }

    apply {
        multipath_mode_table.apply();
        if (MULTIPATH_CFG_MODE == MULTIPATH_MODE_FLOWLET && meta.multipath_retries == 0) {
            flowlet_lookup();
        }
        if (meta.nexthop_id == 0) {
            wcmp_group_table.apply();
            if (meta.nexthop_id == 0) {
                multipath_choose();
                if (meta.nexthop_id == 0) {
                    if (meta.multipath_retries < MULTIPATH_MAX_RETRIES) {
                        multipath_retry();
                    } else {
                        multipath_no_live_member();
                    }
                } else if (MULTIPATH_CFG_MODE == MULTIPATH_MODE_FLOWLET) {
                    flowlet_remember();
                }
            }
        }
    }
}

#endif
