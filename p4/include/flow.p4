// Weft pipeline: the flow key (5-tuple + RoCE destination QP) of multipath, flowlets, postcards
// and the postcard watch table. Only the features that need it build it (each BMv2 primitive
// costs): Multipath and TelemetryIngress apply FlowKey, which runs once per packet.
#ifndef WEFT_FLOW_P4
#define WEFT_FLOW_P4

// The flow hash (crc32 of the flow key) costs a few microseconds on BMv2, so only the features
// that need it compute it: multipath and postcards.
#define COMPUTE_FLOW_HASH                                   \
    hash(meta.flow_hash,                                    \
         HashAlgorithm.crc32,                               \
         32w0,                                              \
         { meta.flow_src,                                   \
           meta.flow_dst,                                   \
           meta.ip_proto,                                   \
           meta.l4_src_port,                                \
           meta.l4_dst_port,                                \
           meta.dst_qp },                                   \
         32w0xffffffff);

control FlowKey(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t sm) {
    apply {
        if (meta.flow_key_valid == 1) {
            return;
        }
        meta.flow_key_valid = 1;
        if (hdr.ipv4.isValid()) {
            meta.flow_src = (bit<128>)hdr.ipv4.src_addr;
            meta.flow_dst = (bit<128>)hdr.ipv4.dst_addr;
            meta.ip_proto = hdr.ipv4.protocol;
        } else if (hdr.ipv6.isValid()) {
            meta.flow_src = hdr.ipv6.src_addr;
            meta.flow_dst = hdr.ipv6.dst_addr;
            meta.ip_proto = hdr.ipv6.next_hdr;
        }
        if (hdr.udp.isValid()) {
            meta.l4_src_port = hdr.udp.src_port;
            meta.l4_dst_port = hdr.udp.dst_port;
        } else if (hdr.tcp.isValid()) {
            meta.l4_src_port = hdr.tcp.src_port;
            meta.l4_dst_port = hdr.tcp.dst_port;
        }
        // RoCEv2 flows between the same two NIC ports differ only by QP: hash the destination QP
        // too so that QPs spread over the paths.
        if (hdr.bth.isValid()) {
            meta.dst_qp = hdr.bth.dst_qp;
        }
    }
}

#endif
