//! The TUN I/O of one emulator lane when the lab's devices have offload (`IFF_VNET_HDR` with
//! TSO/USO): the reads and the `writev` calls. What the bytes mean — validating a frame, cutting
//! it into MTU segments, the head of a run of segments written as one GSO packet — is
//! `quiclab_link::wire::offload`, pure and tested without a device.

pub use quiclab_model::fidelity::OffloadFigures;
use std::io::ErrorKind;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use tun_rs::SyncDevice;

use quiclab_link::wire::offload::run_end;
pub use quiclab_link::wire::offload::{
    Frame, FrameReader, LARGE, MAX_HEAD, PACKET_OFFSET, Unsplittable, split_frame,
};

/// Fault injection for tests of the fallback: with this variable set, the first coalesced write
/// of every offload lane is treated as refused by the kernel (the fallback reason says so).
pub const FAULT_GSO_REFUSED_ENV: &str = "QUICLAB_FAULT_GSO_REFUSED";

/// A lane's offload I/O.
pub struct OffloadIo {
    ingress: Arc<SyncDevice>,
    egress: Arc<SyncDevice>,
    reader: FrameReader,
    window_ns: u64,
    /// Each packet written on its own (window 0, or after a refused coalesced write).
    plain: bool,
    /// Fault injection ([`FAULT_GSO_REFUSED_ENV`]): the next coalesced write is refused.
    refuse_next: bool,
    head: [u8; MAX_HEAD],
    figures: OffloadFigures,
}

impl OffloadIo {
    /// `mtu`: the devices' MTU (no packet the model sees is longer).
    pub fn new(
        ingress: Arc<SyncDevice>,
        egress: Arc<SyncDevice>,
        mtu: u16,
        window_ns: u64,
    ) -> OffloadIo {
        OffloadIo {
            ingress,
            egress,
            reader: FrameReader::new(mtu as usize),
            window_ns,
            plain: window_ns == 0,
            refuse_next: std::env::var_os(FAULT_GSO_REFUSED_ENV).is_some(),
            head: [0; MAX_HEAD],
            figures: OffloadFigures {
                window_us: window_ns as f64 / 1e3,
                ..Default::default()
            },
        }
    }

    pub fn ingress_fd(&self) -> RawFd {
        self.ingress.as_raw_fd()
    }

    /// The coalescing window in ns (0 once the lane writes each packet on its own).
    pub fn window_ns(&self) -> u64 {
        if self.plain { 0 } else { self.window_ns }
    }

    /// Reads one frame from the ingress device. `Ok(None)` when nothing was waiting; a frame that
    /// cannot be split is dropped and counted (never forwarded half-parsed) and reads as
    /// `Ok(Some(None))`.
    pub fn read(&mut self) -> std::io::Result<Option<Option<Frame>>> {
        let mut buf = self.reader.buffer();
        match crate::os::read(self.ingress.as_raw_fd(), &mut buf) {
            Ok(n) => Ok(Some(self.reader.accept(buf, n))),
            Err(e) => {
                self.reader.unused(buf);
                if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Writes `batch` (segments by frame and index, in release order): each run of consecutive
    /// segments of one frame becomes one write (a GSO packet from the read buffer), or every
    /// segment its own write once the lane is plain. `written[i]` says whether segment `i` reached
    /// the kernel. When the kernel refuses a coalesced write, the lane switches to plain writes for
    /// good and writes that run's segments again one by one.
    pub fn write(&mut self, batch: &[(&Frame, usize)], written: &mut Vec<bool>) {
        written.clear();
        self.figures.batches += 1;
        self.figures.batch_segments += batch.len() as u64;
        let mut k = 0;
        while k < batch.len() {
            let (frame, first) = batch[k];
            let end = if self.plain { k + 1 } else { run_end(batch, k) };
            let last = batch[end - 1].1;
            let ok = if last > first && std::mem::take(&mut self.refuse_next) {
                Err(std::io::Error::other(format!(
                    "fault injection: {FAULT_GSO_REFUSED_ENV}"
                )))
            } else {
                self.write_run(frame, first, last)
            };
            match ok {
                Ok(()) => written.resize(end, true),
                Err(e) if last > first => {
                    self.plain = true;
                    self.figures.fallback = Some(format!(
                        "the kernel refused a coalesced write ({e}); every packet is written on its own from then on"
                    ));
                    for i in first..=last {
                        let ok = self.write_run(frame, i, i).is_ok();
                        written.push(ok);
                    }
                }
                Err(_) => written.push(false),
            }
            k = end;
        }
    }

    fn write_run(&mut self, frame: &Frame, first: usize, last: usize) -> std::io::Result<()> {
        let (head_len, range) = frame.run_head(first, last, &mut self.head);
        let payload = &frame.bytes()[range];
        crate::os::write2(self.egress.as_raw_fd(), &self.head[..head_len], payload)
    }

    /// Takes back a frame whose segments have all left.
    pub fn recycle(&mut self, frame: Frame) {
        self.reader.recycle(frame);
    }

    pub fn figures(&self) -> OffloadFigures {
        let mut f = self.figures.clone();
        let r = self.reader.figures();
        f.reads = r.reads;
        f.read_segments = r.read_segments;
        f.dropped_unsplittable = r.dropped_unsplittable;
        f.last_unsplittable = r.last_unsplittable.clone();
        let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        f.segments_per_read = ratio(f.read_segments, f.reads);
        f.segments_per_batch = ratio(f.batch_segments, f.batches);
        f
    }
}
