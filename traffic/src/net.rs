//! The engine's network: one UDP socket bound to the host's RoCEv2 port receives everything
//! (data, ACKs, NAKs, CNPs, demultiplexed by BTH destination QP); data leaves from one socket
//! per QP source port, so the 5-tuple carries the QP's entropy as a NIC's would. The TOS byte
//! (DSCP and ECN) is set per packet and read back from every arriving packet.

use std::collections::HashMap;
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::socket::{
    ControlMessage, ControlMessageOwned, MsgFlags, SockaddrIn, recvmsg, sendmsg, setsockopt,
    sockopt,
};
use nix::sys::time::TimeSpec;

/// A received datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recv {
    pub len: usize,
    pub from: SocketAddrV4,
    /// DSCP << 2 | ECN.
    pub tos: u8,
}

/// What the engine needs from a network; tests wrap it to drop, reorder or mark packets.
pub trait Net {
    fn local(&self) -> SocketAddrV4;
    /// Sends from `src_port` on the local address (the RoCEv2 port itself for ACKs and CNPs).
    fn send(&mut self, src_port: u16, to: SocketAddrV4, tos: u8, data: &[u8]) -> io::Result<()>;
    /// Waits up to `timeout` (zero: does not wait) for one datagram.
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<Recv>>;
}

pub struct UdpNet {
    local: SocketAddrV4,
    main: UdpSocket,
    senders: HashMap<u16, UdpSocket>,
    cmsg: Vec<u8>,
}

fn errno(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

impl UdpNet {
    pub fn bind(addr: Ipv4Addr, port: u16) -> io::Result<UdpNet> {
        let main = UdpSocket::bind((addr, port))?;
        setsockopt(&main, sockopt::IpRecvTos, &true).map_err(errno)?;
        // Bursts from many QPs at once must not overflow the default buffer.
        let _ = setsockopt(&main, sockopt::RcvBuf, &(4 << 20));
        let local = match main.local_addr()? {
            std::net::SocketAddr::V4(a) => a,
            std::net::SocketAddr::V6(_) => {
                return Err(io::Error::other("bound an IPv6 address"));
            }
        };
        Ok(UdpNet {
            local,
            main,
            senders: HashMap::new(),
            cmsg: nix::cmsg_space!(u8),
        })
    }
}

impl Net for UdpNet {
    fn local(&self) -> SocketAddrV4 {
        self.local
    }

    fn send(&mut self, src_port: u16, to: SocketAddrV4, tos: u8, data: &[u8]) -> io::Result<()> {
        let sock = if src_port == self.local.port() {
            &self.main
        } else {
            match self.senders.entry(src_port) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(UdpSocket::bind((*self.local.ip(), src_port))?)
                }
            }
        };
        let dst = SockaddrIn::from(to);
        match sendmsg(
            sock.as_raw_fd(),
            &[IoSlice::new(data)],
            &[ControlMessage::Ipv4Tos(&tos)],
            MsgFlags::empty(),
            Some(&dst),
        ) {
            Ok(_) => Ok(()),
            // A full socket buffer is a drop, as a full NIC queue would be.
            Err(Errno::ENOBUFS | Errno::EAGAIN) => Ok(()),
            Err(e) => Err(errno(e)),
        }
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<Recv>> {
        // ppoll, not SO_RCVTIMEO: the socket timeout counts in jiffies (4 ms here), far too
        // coarse to pace a few hundred packets per second.
        if !timeout.is_zero() {
            let mut fds = [PollFd::new(self.main.as_fd(), PollFlags::POLLIN)];
            match ppoll(&mut fds, Some(TimeSpec::from(timeout)), None) {
                Ok(0) | Err(Errno::EINTR) => return Ok(None),
                Ok(_) => {}
                Err(e) => return Err(errno(e)),
            }
        }
        let mut iov = [IoSliceMut::new(buf)];
        let r = recvmsg::<SockaddrIn>(
            self.main.as_raw_fd(),
            &mut iov,
            Some(&mut self.cmsg),
            MsgFlags::MSG_DONTWAIT,
        );
        match r {
            Ok(m) => {
                let mut tos = 0u8;
                if let Ok(cmsgs) = m.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::Ipv4Tos(t) = c {
                            tos = t;
                        }
                    }
                }
                let from = m
                    .address
                    .map(|a| SocketAddrV4::new(a.ip(), a.port()))
                    .unwrap_or_else(|| SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
                Ok(Some(Recv {
                    len: m.bytes,
                    from,
                    tos,
                }))
            }
            Err(Errno::EAGAIN | Errno::EINTR) => Ok(None),
            Err(e) => Err(errno(e)),
        }
    }
}
