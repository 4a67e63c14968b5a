// Weft pipeline: state shared between egress (writer) and ingress (reader).
#ifndef WEFT_QUEUE_STATE_P4
#define WEFT_QUEUE_STATE_P4

// Last dequeue-time depth (packets) of each egress port, written by every packet leaving the
// port (PortEgress) and read by adaptive multipath in ingress. A port is only sampled while
// packets leave it, so an idle port reads as its last value: 0 once its queue has drained.
@id(ID_QUEUE_DEPTH_REG)
register<bit<19>>(NUM_PORTS) queue_depth_reg;

// The same per (egress port, queue), index port * 8 + queue: BMv2's deq_qdepth is the depth of
// the departing packet's own priority queue, so the per-port cell above follows whichever queue
// sent last. Trimming reads this one: a packet is trimmed when its own queue is long, whatever
// the trimmed queue (strict priority, nearly always empty) last reported.
@id(ID_QUEUE_CLASS_DEPTH_REG)
register<bit<19>>(NUM_PORT_QUEUES) queue_class_depth_reg;

#endif
