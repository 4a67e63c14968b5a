// Weft pipeline: parser, checksums, deparser.
//
//   start ─┬─ resubmitted pass, held packet ─> restore ingress_port ─┐
//          ├─ ingress_port == CPU_PORT ─> packet_out                │ (the rest is payload)
//          └────────────────────────────────────────────────────────┴─> ethernet
//   ethernet ─┬─ 0x8100 vlan ─┬─ 0x0800 ipv4 ─┬─ (ihl 5) udp ─── dport 4791 ─> bth
//             │  (PCP = class,└─ 0x86dd ipv6 ─┤            tcp
//             │   tag removed)                │
//             ├─ 0x0800 ipv4 / 0x86dd ipv6 ───┘  (both: meta.dscp)
//             ├─ 0x8808 pfc  (MAC control; the opcode is checked in ingress)
//             └─ 0x88b5 postcard
//
// The parser does per-header work that would otherwise cost a condition and a table in
// ingress: the DSCP for classification, the 802.1Q PCP as the default class, removing the tag
// (routed ports are untagged), the ingress port of a resubmitted pass.
#ifndef WEFT_PARSER_P4
#define WEFT_PARSER_P4

parser WeftParser(packet_in pkt,
                  out headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t sm) {
    state start {
        transition select(sm.instance_type, sm.ingress_port) {
            (INSTANCE_TYPE_RESUBMIT, _): parse_resubmitted;
            (INSTANCE_TYPE_RECIRC, _): parse_held;
            (_, CPU_PORT): parse_packet_out;
            default: parse_ethernet;
        }
    }

    // BMv2 brings a resubmitted packet back with ingress_port 0; the pass before saved it.
    state parse_resubmitted {
        sm.ingress_port = meta.resubmit_ingress_port;
        transition parse_ethernet;
    }

    // A held packet (PfcHold, pfc.p4) comes around with ingress_port 0; it carries the port.
    state parse_held {
        sm.ingress_port = HOLD_INGRESS_PORT;
        transition parse_ethernet;
    }

    // Packet-out leaves as it came: nothing after the packet_out header is parsed.
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition accept;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_vlan;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            ETHERTYPE_MAC_CONTROL: parse_pfc;
            ETHERTYPE_POSTCARD: parse_postcard;
            default: accept;
        }
    }

    // Routed ports are untagged: the PCP is the class unless the DSCP is mapped, and the tag is
    // not sent on.
    state parse_vlan {
        pkt.extract(hdr.vlan);
        sm.priority = hdr.vlan.pcp;
        hdr.ethernet.ether_type = hdr.vlan.ether_type;
        hdr.vlan.setInvalid();
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }

    state parse_pfc {
        pkt.extract(hdr.pfc);
        transition accept;
    }

    state parse_postcard {
        pkt.extract(hdr.postcard);
        transition accept;
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        meta.dscp = hdr.ipv4.dscp;
        // Options move the L4 header; such packets are routed but not hashed on L4 ports.
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (4w5, IP_PROTO_UDP): parse_udp;
            (4w5, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        meta.dscp = hdr.ipv6.dscp;
        transition select(hdr.ipv6.next_hdr) {
            IP_PROTO_UDP: parse_udp;
            IP_PROTO_TCP: parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            UDP_PORT_ROCEV2: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        pkt.extract(hdr.bth);
        transition accept;
    }
}

// The IPv4 checksum is not verified: a corrupted header is the NIC's problem, and the check
// would cost every packet. It is recomputed after TTL and ECN rewrites.
control WeftVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

control WeftComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version,
              hdr.ipv4.ihl,
              hdr.ipv4.dscp,
              hdr.ipv4.ecn,
              hdr.ipv4.total_len,
              hdr.ipv4.identification,
              hdr.ipv4.flags,
              hdr.ipv4.frag_offset,
              hdr.ipv4.ttl,
              hdr.ipv4.protocol,
              hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum,
            HashAlgorithm.csum16);
    }
}

control WeftDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.postcard);
        pkt.emit(hdr.pfc);
        pkt.emit(hdr.pfc_pad);
        pkt.emit(hdr.vlan);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv6);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.bth);
    }
}

#endif
