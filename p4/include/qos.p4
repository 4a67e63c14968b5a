// Weft pipeline: QoS classification. DSCP -> traffic class (= BMv2 priority queue = PFC
// priority) and whether the class is lossless (PFC-protected).
#ifndef WEFT_QOS_P4
#define WEFT_QOS_P4

control QosClassify(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t sm) {
    // Written by the plugin from CONFIG_DB DSCP_TO_TC_MAP / PORT_QOS_MAP pfc_enable.
    @id(ID_SET_TRAFFIC_CLASS)
    action set_traffic_class(traffic_class_t traffic_class, bit<1> lossless) {
        meta.traffic_class = traffic_class;
        meta.lossless = lossless;
    }

    // No entry: keep the class from the 802.1Q PCP (or 0), lossy.
    @id(ID_QOS_DEFAULT)
    action qos_default() { }

    @id(ID_QOS_CLASSIFY_TABLE)
    @weft_owner("plugin", "from CONFIG_DB DSCP_TO_TC_MAP and PORT_QOS_MAP")
    table qos_classify_table {
        key = {
            meta.dscp : exact @name("dscp");
        }
        actions = {
            set_traffic_class;
            @defaultonly qos_default;
        }
        const default_action = qos_default();
        size = QOS_CLASSIFY_TABLE_SIZE;
    }

    apply {
        if (hdr.ipv4.isValid()) {
            meta.dscp = hdr.ipv4.dscp;
            meta.ecn = hdr.ipv4.ecn;
        } else if (hdr.ipv6.isValid()) {
            meta.dscp = hdr.ipv6.dscp;
            meta.ecn = hdr.ipv6.ecn;
        }
        if (hdr.vlan.isValid()) {
            meta.traffic_class = hdr.vlan.pcp;
        }
        qos_classify_table.apply();
    }
}

#endif
