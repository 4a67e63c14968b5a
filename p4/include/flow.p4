// Weft pipeline: the flow key (5-tuple + RoCE destination QP) of multipath, flowlets, postcards
// and the postcard watch table, and its hash.
//
// The key is 40 bytes: source and destination address (128 bits each, IPv4 zero-extended), IP
// protocol, L4 source and destination port (0 without UDP/TCP), BTH destination QP (0 without
// BTH). flow_hash = crc32(key) % 0xffffffff (BMv2's `hash(..., base 0, max)` is base + crc % max).
// RoCEv2 flows between the same two NIC ports differ only by QP: the destination QP is hashed too
// so that QPs spread over the paths. weft-simulate reproduces this hash bit for bit
// (simulate/src/hash.rs).
//
// Each BMv2 primitive costs, and an action cannot run an extern conditionally, so the key is one
// expression (every part chosen by header validity) that FLOW_HASH hashes directly: one
// assignment and one hash. (Choices are written as sums of disjoint `c ? x : 0`: p4c splits a
// `?:` nested in another's branch into several assignments.) UDP and TCP never both parse. Only the features that need it compute it: multipath (every packet
// of a group) and postcards (FlowKey, which also fills the watch table's key fields).
#ifndef WEFT_FLOW_P4
#define WEFT_FLOW_P4

#define FLOW_ADDRS_PROTO                                                                      \
    (hdr.ipv4.isValid()                                                                       \
        ? ((bit<128>)hdr.ipv4.src_addr ++ (bit<128>)hdr.ipv4.dst_addr ++ hdr.ipv4.protocol)   \
        : (hdr.ipv6.src_addr ++ hdr.ipv6.dst_addr ++ hdr.ipv6.next_hdr))
#define FLOW_L4_PORTS                                                                         \
    ((hdr.udp.isValid() ? (hdr.udp.src_port ++ hdr.udp.dst_port) : 32w0)                      \
     | (hdr.tcp.isValid() ? (hdr.tcp.src_port ++ hdr.tcp.dst_port) : 32w0))
#define FLOW_DST_QP (hdr.bth.isValid() ? hdr.bth.dst_qp : 24w0)

#define FLOW_HASH                                                                             \
    hash(meta.flow_hash, HashAlgorithm.crc32, 32w0,                                           \
         { FLOW_ADDRS_PROTO ++ FLOW_L4_PORTS ++ FLOW_DST_QP }, 32w0xffffffff);

control FlowKey(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t sm) {
    @hidden action flow_key() {
        meta.flow_src = hdr.ipv4.isValid() ? (bit<128>)hdr.ipv4.src_addr : hdr.ipv6.src_addr;
        meta.flow_dst = hdr.ipv4.isValid() ? (bit<128>)hdr.ipv4.dst_addr : hdr.ipv6.dst_addr;
        meta.ip_proto = hdr.ipv4.isValid() ? hdr.ipv4.protocol : hdr.ipv6.next_hdr;
        meta.l4_dst_port = (hdr.udp.isValid() ? hdr.udp.dst_port : 16w0)
                         | (hdr.tcp.isValid() ? hdr.tcp.dst_port : 16w0);
        meta.dst_qp = FLOW_DST_QP;
    }

    apply {
        flow_key();
    }
}

#endif
