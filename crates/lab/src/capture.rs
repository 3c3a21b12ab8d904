//! A pcapng capture of what crosses the emulated link, with the run's TLS and QUIC secrets
//! inside, so that Wireshark or tshark decrypt HTTP/2 and HTTP/3 from the one file.
//!
//! What is captured: every packet as it arrives at the bottleneck (the emulator's ingress),
//! segments of offload super-packets one by one as they cross the emulated wire, on two
//! interfaces — `uplink` (client → server) and `downlink` (server → client) — with real
//! (Unix) timestamps in nanoseconds. A packet the link did not forward carries a comment saying
//! why (`dropped: queue full`, `lost: random loss`, `dropped: network switch`); the others were
//! forwarded. The packets are raw IP (LINKTYPE_RAW).
//!
//! Why the file is written at the end: a Decryption Secrets Block must come before the packets
//! it decrypts for a one-pass reader, and the secrets are known only once the handshakes are
//! done. The packets go to a side file (`.NAME.quiclab-part`, beside the output) while the run
//! goes on; [`CaptureWriter::finish`] writes the header, the interfaces, the secrets and then the
//! packets into the output, and removes the side file. A size cap keeps a long run from filling
//! the disk: past it, packets are counted, not written (the start — handshakes included — is
//! kept, which is what decryption needs).

pub use quiclab_model::fidelity::CaptureSummary;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Result;
use pcap_parser::ToVec;
use pcap_parser::pcapng::{
    DecryptionSecretsBlock, EnhancedPacketBlock, InterfaceDescriptionBlock, OptionCode,
    PcapNGOption, SecretsType, SectionHeaderBlock,
};
use std::borrow::Cow;

use crate::emulator::Direction;

/// The default size cap of a capture's packets (bytes of pcapng blocks).
pub const DEFAULT_MAX_BYTES: u64 = 512 << 20;

/// Where and how much to capture.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptureConfig {
    /// The pcapng file to write (a file the user named: created new, or replaced with `force`).
    pub path: PathBuf,
    /// Replace an existing file.
    pub force: bool,
    /// Stop writing packets past this many bytes of blocks (they are then only counted).
    pub max_bytes: u64,
}

impl CaptureConfig {
    /// The capture `--pcap FILE` asks for (None without the flag), checked before any lab is
    /// built: a missing directory, an existing file without `force` or a symbolic link is an
    /// error naming the flag.
    pub fn for_flag(path: Option<&Path>, force: bool) -> Result<Option<CaptureConfig>> {
        let Some(path) = path else { return Ok(None) };
        quiclab_outputs::check_user_file(path, "--pcap", force)?;
        Ok(Some(CaptureConfig {
            force,
            ..CaptureConfig::new(path)
        }))
    }

    pub fn new(path: impl Into<PathBuf>) -> CaptureConfig {
        CaptureConfig {
            path: path.into(),
            force: false,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// What became of a captured packet at the bottleneck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Forwarded,
    /// Tail drop: the queue was full.
    DroppedQueue,
    /// The link's random loss.
    Lost,
    /// Sent from or to an address of a network the client had left (network switches).
    DroppedSwitch,
}

impl Fate {
    fn comment(self) -> Option<&'static str> {
        match self {
            Fate::Forwarded => None,
            Fate::DroppedQueue => Some("dropped: queue full"),
            Fate::Lost => Some("lost: random loss"),
            Fate::DroppedSwitch => Some("dropped: network switch"),
        }
    }
}

/// One packet for the capture: its arrival (ns since the emulator's epoch), way and fate.
pub struct Captured {
    pub t: u64,
    pub direction: Direction,
    pub fate: Fate,
    /// The IP packet.
    pub data: Vec<u8>,
}

/// The interface ids of the two directions.
fn interface_of(direction: Direction) -> u32 {
    match direction {
        Direction::Uplink => 0,
        Direction::Downlink => 1,
    }
}

fn text_option(code: OptionCode, text: &str) -> PcapNGOption<'static> {
    PcapNGOption {
        code,
        len: text.len() as u16,
        value: Cow::Owned(text.as_bytes().to_vec()),
    }
}

fn encode(mut block: impl ToVec) -> Vec<u8> {
    block
        .to_vec()
        .expect("a pcapng block serialises into a Vec")
}

/// The Section Header Block: the application and a comment.
pub fn section_header(comment: &str) -> Vec<u8> {
    encode(SectionHeaderBlock {
        block_type: 0,
        block_len1: 0,
        bom: 0,
        major_version: 1,
        minor_version: 0,
        section_len: -1,
        options: vec![
            text_option(
                OptionCode::ShbUserAppl,
                concat!("quiclab ", env!("CARGO_PKG_VERSION")),
            ),
            text_option(OptionCode::Comment, comment),
        ],
        block_len2: 0,
    })
}

/// An Interface Description Block of raw IP packets with nanosecond timestamps.
pub fn interface(name: &str, description: &str) -> Vec<u8> {
    encode(InterfaceDescriptionBlock {
        block_type: 0,
        block_len1: 0,
        linktype: pcap_parser::Linktype::RAW,
        reserved: 0,
        snaplen: 0,
        options: vec![
            text_option(OptionCode::IfName, name),
            text_option(OptionCode::IfDescription, description),
            PcapNGOption {
                code: OptionCode::IfTsresol,
                len: 1,
                value: Cow::Owned(vec![9]),
            },
        ],
        block_len2: 0,
        if_tsresol: 9,
        if_tsoffset: 0,
    })
}

/// An Enhanced Packet Block: packet `data` on `interface` at `unix_ns`, with an optional comment.
pub fn packet_block(interface: u32, unix_ns: u64, data: &[u8], comment: Option<&str>) -> Vec<u8> {
    encode(EnhancedPacketBlock {
        block_type: 0,
        block_len1: 0,
        if_id: interface,
        ts_high: (unix_ns >> 32) as u32,
        ts_low: unix_ns as u32,
        caplen: data.len() as u32,
        origlen: data.len() as u32,
        data,
        options: comment
            .map(|c| vec![text_option(OptionCode::Comment, c)])
            .unwrap_or_default(),
        block_len2: 0,
    })
}

/// A Decryption Secrets Block holding an NSS key log (the `SSLKEYLOGFILE` format).
pub fn secrets_block(key_log: &[u8]) -> Vec<u8> {
    encode(DecryptionSecretsBlock {
        block_type: 0,
        block_len1: 0,
        secrets_type: SecretsType::TlsKeyLog,
        secrets_len: key_log.len() as u32,
        data: key_log,
        options: Vec::new(),
        block_len2: 0,
    })
}

impl Drop for CaptureWriter {
    fn drop(&mut self) {
        // The side file is quiclab's own: never left behind, however the capture ended.
        let _ = std::fs::remove_file(&self.part_path);
    }
}

/// The capture of one run while it goes on (see the module's documentation).
pub struct CaptureWriter {
    config: CaptureConfig,
    /// The output, reserved when the capture starts (created empty, or an existing regular file
    /// with `force`).
    output: quiclab_outputs::UserFile,
    /// The packets as they come: quiclab's own temporary file beside the output, created
    /// exclusively (never a file that was there) and removed at the end.
    part_path: PathBuf,
    part: BufWriter<File>,
    /// Unix time of the emulator's epoch, in ns.
    epoch_unix_ns: u64,
    packets: u64,
    written: u64,
    over_cap: u64,
    /// Why the side file could not be written (a full disk): from then on packets are only
    /// counted, and the capture ends marked missing (the run goes on and is stored).
    error: Option<String>,
}

impl CaptureWriter {
    /// Checks that the output may be written (before anything runs) and opens the side file.
    pub fn create(config: &CaptureConfig, epoch_unix_ns: u64) -> Result<CaptureWriter> {
        let output = quiclab_outputs::UserFile::reserve(&config.path, "--pcap", config.force)?;
        let (part_path, part) = output.temp()?;
        Ok(CaptureWriter {
            config: config.clone(),
            output,
            part_path,
            part: BufWriter::with_capacity(1 << 20, part),
            epoch_unix_ns,
            packets: 0,
            written: 0,
            over_cap: 0,
            error: None,
        })
    }

    /// Adds one packet (or counts it, past the cap).
    pub fn write(&mut self, p: &Captured) -> Result<()> {
        let block = packet_block(
            interface_of(p.direction),
            self.epoch_unix_ns + p.t,
            &p.data,
            p.fate.comment(),
        );
        if self.error.is_some() {
            // The capture is lost already (it ends marked missing); the run goes on.
            return Ok(());
        }
        if self.written + block.len() as u64 > self.config.max_bytes {
            self.over_cap += 1;
            return Ok(());
        }
        if let Err(e) = self.part.write_all(&block) {
            self.error = Some(format!("writing {}: {e}", self.part_path.display()));
            return Ok(());
        }
        self.written += block.len() as u64;
        self.packets += 1;
        Ok(())
    }

    /// Writes the output — header, interfaces, `key_log` (if any), the packets — and removes
    /// the side file. `comment` describes the run (the link, the lab).
    pub fn finish(
        mut self,
        key_log: Option<&[u8]>,
        comment: &str,
        dropped_by_writer: u64,
    ) -> Result<CaptureSummary> {
        let path = self.config.path.clone();
        let result = (|| -> Result<CaptureSummary> {
            if let Some(e) = &self.error {
                anyhow::bail!("{e}");
            }
            self.part.flush()?;
            let (out_tmp, out_file) = self.output.temp()?;
            let mut out = BufWriter::new(out_file);
            let mut note = comment.to_string();
            if self.over_cap > 0 {
                note.push_str(&format!(
                    "; {} packet(s) past the {}-byte cap not captured",
                    self.over_cap, self.config.max_bytes
                ));
            }
            if dropped_by_writer > 0 {
                note.push_str(&format!(
                    "; {dropped_by_writer} packet(s) not captured: the writer fell behind"
                ));
            }
            let written = (|| -> std::io::Result<u64> {
                out.write_all(&section_header(&note))?;
                out.write_all(&interface(
                    "uplink",
                    "client to server, at the bottleneck's ingress",
                ))?;
                out.write_all(&interface(
                    "downlink",
                    "server to client, at the bottleneck's ingress",
                ))?;
                let secrets = key_log
                    .filter(|k| !k.is_empty())
                    .map(|k| {
                        out.write_all(&secrets_block(k))?;
                        Ok::<_, std::io::Error>(
                            k.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count() as u64,
                        )
                    })
                    .transpose()?
                    .unwrap_or(0);
                let mut part = File::open(&self.part_path)?;
                std::io::copy(&mut part, &mut out)?;
                out.flush()?;
                Ok(secrets)
            })();
            drop(out);
            // The output's temporary file is quiclab's own: gone when it could not be written.
            let secrets = written.inspect_err(|_| {
                let _ = std::fs::remove_file(&out_tmp);
            })?;
            self.output.commit(&out_tmp)?;
            let bytes = std::fs::metadata(&path)?.len();
            Ok(CaptureSummary {
                path: path.clone(),
                packets: self.packets,
                bytes,
                over_cap: self.over_cap,
                dropped_by_writer,
                secrets,
                missing: None,
            })
        })();
        // The side file is quiclab's own (created exclusively by it): gone whatever happened.
        let _ = std::fs::remove_file(&self.part_path);
        // A capture that could not be written (a full disk) costs the capture, not the run:
        // the summary says it is missing and why, and the measurement is stored.
        Ok(result.unwrap_or_else(|e| CaptureSummary {
            path: path.clone(),
            packets: self.packets,
            bytes: 0,
            over_cap: self.over_cap,
            dropped_by_writer,
            secrets: 0,
            missing: Some(format!("--pcap: writing {}: {e:#}", path.display())),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_parser::PcapBlockOwned;
    use pcap_parser::pcapng::{Block, PcapNGSlice};

    fn blocks(bytes: &[u8]) -> Vec<String> {
        PcapNGSlice::from_slice(bytes)
            .unwrap()
            .map(|b| match b.unwrap() {
                PcapBlockOwned::NG(Block::SectionHeader(_)) => "shb".to_string(),
                PcapBlockOwned::NG(Block::InterfaceDescription(i)) => {
                    format!("idb {:?} {}", i.linktype, i.if_tsresol)
                }
                PcapBlockOwned::NG(Block::DecryptionSecrets(d)) => {
                    format!("dsb {}", String::from_utf8_lossy(d.data))
                }
                PcapBlockOwned::NG(Block::EnhancedPacket(e)) => {
                    let comment = e
                        .options
                        .iter()
                        .find(|o| o.code == OptionCode::Comment)
                        .map(|o| String::from_utf8_lossy(o.as_bytes().unwrap()).into_owned());
                    format!(
                        "epb {} {} {} {:?}",
                        e.if_id,
                        (u64::from(e.ts_high) << 32) | u64::from(e.ts_low),
                        e.caplen,
                        comment
                    )
                }
                _ => "other".to_string(),
            })
            .collect()
    }

    #[test]
    fn a_capture_reads_back_with_its_secrets_before_its_packets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.pcapng");
        let mut w = CaptureWriter::create(&CaptureConfig::new(&path), 1_000_000_000).unwrap();
        let packet = |t, direction, fate, n| Captured {
            t,
            direction,
            fate,
            data: vec![0x45; n],
        };
        w.write(&packet(5, Direction::Uplink, Fate::Forwarded, 60))
            .unwrap();
        w.write(&packet(7, Direction::Downlink, Fate::DroppedQueue, 1401))
            .unwrap();
        let keys = b"CLIENT_RANDOM 00 11\nCLIENT_TRAFFIC_SECRET_0 22 33\n";
        let s = w.finish(Some(keys), "a test", 0).unwrap();
        assert_eq!((s.packets, s.over_cap, s.secrets), (2, 0, 2));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(s.bytes, bytes.len() as u64);
        let got = blocks(&bytes);
        assert_eq!(got[0], "shb");
        assert_eq!(got[1], "idb Linktype(101) 9");
        assert_eq!(got[2], "idb Linktype(101) 9");
        assert!(got[3].starts_with("dsb CLIENT_RANDOM"), "{got:?}");
        assert_eq!(got[4], "epb 0 1000000005 60 None");
        assert_eq!(
            got[5],
            "epb 1 1000000007 1401 Some(\"dropped: queue full\")"
        );
        assert_eq!(got.len(), 6);
        // Only the output is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn the_cap_keeps_the_start_and_counts_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.pcapng");
        let config = CaptureConfig {
            max_bytes: 300,
            ..CaptureConfig::new(&path)
        };
        let mut w = CaptureWriter::create(&config, 0).unwrap();
        for t in 0..10 {
            w.write(&Captured {
                t,
                direction: Direction::Uplink,
                fate: Fate::Forwarded,
                data: vec![0x45; 100],
            })
            .unwrap();
        }
        let s = w.finish(None, "capped", 3).unwrap();
        assert_eq!((s.packets, s.over_cap, s.secrets), (2, 8, 0));
        let got = blocks(&std::fs::read(&path).unwrap());
        assert_eq!(got.len(), 3 + 2, "{got:?}");
        assert!(got[3].starts_with("epb 0 0 "), "{got:?}");
    }

    #[test]
    fn an_existing_file_is_not_replaced_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("theirs.pcapng");
        std::fs::write(&path, b"someone else's").unwrap();
        let e = CaptureWriter::create(&CaptureConfig::new(&path), 0)
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("--force"), "{e:#}");
        assert_eq!(std::fs::read(&path).unwrap(), b"someone else's");
        let missing = dir.path().join("no/such/dir/x.pcapng");
        let e = CaptureWriter::create(&CaptureConfig::new(&missing), 0)
            .err()
            .unwrap();
        assert!(
            format!("{e:#}").contains("directory does not exist"),
            "{e:#}"
        );
    }
}
