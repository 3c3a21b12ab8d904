//! QUIC packet protection (RFC 9001, Section 5) for reading: the keys of a secret
//! (HKDF-Expand-Label "quic key", "quic iv", "quic hp"), the Initial secrets of a connection's
//! first Destination Connection ID, header protection removed and the payload opened — with
//! `ring`, the provider rustls runs on here.

use ring::aead::{self, quic};
use ring::hkdf;

/// QUIC version 1's Initial salt (RFC 9001, Section 5.2).
const INITIAL_SALT_V1: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad,
    0xcc, 0xbb, 0x7f, 0x0a,
];

/// The TLS 1.3 cipher suites QUIC uses, by what they need here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    Aes128GcmSha256,
    Aes256GcmSha384,
    Chacha20Poly1305Sha256,
}

impl Suite {
    fn hkdf(self) -> hkdf::Algorithm {
        match self {
            Suite::Aes256GcmSha384 => hkdf::HKDF_SHA384,
            _ => hkdf::HKDF_SHA256,
        }
    }

    fn aead(self) -> &'static aead::Algorithm {
        match self {
            Suite::Aes128GcmSha256 => &aead::AES_128_GCM,
            Suite::Aes256GcmSha384 => &aead::AES_256_GCM,
            Suite::Chacha20Poly1305Sha256 => &aead::CHACHA20_POLY1305,
        }
    }

    fn hp(self) -> &'static quic::Algorithm {
        match self {
            Suite::Aes128GcmSha256 => &quic::AES_128,
            Suite::Aes256GcmSha384 => &quic::AES_256,
            Suite::Chacha20Poly1305Sha256 => &quic::CHACHA20,
        }
    }

    fn key_len(self) -> usize {
        match self {
            Suite::Aes128GcmSha256 => 16,
            _ => 32,
        }
    }

    /// The suites a traffic secret of `len` bytes can belong to (SHA-384's are 48 bytes).
    pub fn for_secret_len(len: usize) -> &'static [Suite] {
        match len {
            48 => &[Suite::Aes256GcmSha384],
            _ => &[Suite::Aes128GcmSha256, Suite::Chacha20Poly1305Sha256],
        }
    }
}

struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand-Label(secret, label, "", len) of TLS 1.3 (RFC 8446, Section 7.1).
pub fn expand_label(suite: Suite, secret: &[u8], label: &str, len: usize) -> Vec<u8> {
    let prk = hkdf::Prk::new_less_safe(suite.hkdf(), secret);
    let full = format!("tls13 {label}");
    let info_len = (len as u16).to_be_bytes();
    let label_len = [full.len() as u8];
    let context_len = [0u8];
    let info: [&[u8]; 4] = [&info_len, &label_len, full.as_bytes(), &context_len];
    let mut out = vec![0u8; len];
    // Only a length past 255 hash lengths fails: none of the labels here asks for one.
    if let Ok(okm) = prk.expand(&info, Len(len)) {
        let _ = okm.fill(&mut out);
    }
    out
}

/// The client's and the server's Initial secrets of a connection whose client chose `dcid`.
pub fn initial_secrets(dcid: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &INITIAL_SALT_V1).extract(dcid);
    let side = |label: &str| {
        let full = format!("tls13 {label}");
        let info_len = 32u16.to_be_bytes();
        let label_len = [full.len() as u8];
        let context_len = [0u8];
        let info: [&[u8]; 4] = [&info_len, &label_len, full.as_bytes(), &context_len];
        let mut out = vec![0u8; 32];
        if let Ok(okm) = prk.expand(&info, Len(32)) {
            let _ = okm.fill(&mut out);
        }
        out
    };
    (side("client in"), side("server in"))
}

/// One direction's packet protection keys in one key phase.
pub struct Keys {
    pub suite: Suite,
    /// The secret they come from (the next key phase's is derived from it).
    pub secret: Vec<u8>,
    aead: aead::LessSafeKey,
    iv: Vec<u8>,
    hp: quic::HeaderProtectionKey,
    /// Header protection is never updated: every key phase keeps the first one's.
    hp_key: Vec<u8>,
}

impl Keys {
    /// The keys of `secret` under `suite` (None: a key of the wrong length for the suite).
    pub fn new(suite: Suite, secret: &[u8]) -> Option<Keys> {
        let key = expand_label(suite, secret, "quic key", suite.key_len());
        let iv = expand_label(suite, secret, "quic iv", 12);
        let hp = expand_label(suite, secret, "quic hp", suite.key_len());
        Some(Keys {
            suite,
            secret: secret.to_vec(),
            aead: aead::LessSafeKey::new(aead::UnboundKey::new(suite.aead(), &key).ok()?),
            iv,
            hp: quic::HeaderProtectionKey::new(suite.hp(), &hp).ok()?,
            hp_key: hp,
        })
    }

    /// The keys of the next key phase (RFC 9001, Section 6: "quic ku"); header protection stays.
    pub fn next_phase(&self) -> Option<Keys> {
        let len = self.secret.len();
        let secret = expand_label(self.suite, &self.secret, "quic ku", len);
        let key = expand_label(self.suite, &secret, "quic key", self.suite.key_len());
        Some(Keys {
            suite: self.suite,
            iv: expand_label(self.suite, &secret, "quic iv", 12),
            secret,
            aead: aead::LessSafeKey::new(aead::UnboundKey::new(self.suite.aead(), &key).ok()?),
            hp: quic::HeaderProtectionKey::new(self.suite.hp(), &self.hp_key).ok()?,
            hp_key: self.hp_key.clone(),
        })
    }

    /// The 5-byte header protection mask of a 16-byte `sample`.
    pub fn mask(&self, sample: &[u8]) -> Option<[u8; 5]> {
        self.hp.new_mask(sample).ok()
    }

    /// Opens `payload` (ciphertext and tag) of packet number `pn` under `header` (the unprotected
    /// header, its associated data); the plaintext, or None when it does not authenticate.
    pub fn open(&self, pn: u64, header: &[u8], payload: &[u8]) -> Option<Vec<u8>> {
        let mut nonce = [0u8; 12];
        nonce.copy_from_slice(&self.iv);
        for (n, p) in nonce[4..].iter_mut().zip(pn.to_be_bytes()) {
            *n ^= p;
        }
        let mut buf = payload.to_vec();
        let plain = self
            .aead
            .open_in_place(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(header),
                &mut buf,
            )
            .ok()?;
        let n = plain.len();
        buf.truncate(n);
        Some(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 9001, Appendix A.1: the Initial keys of DCID 0x8394c8f03e515708.
    #[test]
    fn the_initial_keys_are_rfc_9001s() {
        let (client, server) = initial_secrets(&hex("8394c8f03e515708"));
        assert_eq!(
            client,
            hex("c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea")
        );
        assert_eq!(
            server,
            hex("3c199828fd139efd216c155ad844cc81fb82fa8d7446fa7d78be803acdda951b")
        );
        let s = Suite::Aes128GcmSha256;
        assert_eq!(
            expand_label(s, &client, "quic key", 16),
            hex("1f369613dd76d5467730efcbe3b1a22d")
        );
        assert_eq!(
            expand_label(s, &client, "quic iv", 12),
            hex("fa044b2f42a3fd3b46fb255c")
        );
        assert_eq!(
            expand_label(s, &client, "quic hp", 16),
            hex("9f50449e04a0e810283a1e9933adedd2")
        );
        assert_eq!(
            expand_label(s, &server, "quic key", 16),
            hex("cf3a5331653c364c88f0f379b6067e37")
        );
    }

    /// RFC 9001, Appendix A.5: a ChaCha20-Poly1305 short-header packet, unprotected and opened.
    #[test]
    fn a_chacha20_packet_of_rfc_9001_opens() {
        let secret = hex("9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b");
        let keys = Keys::new(Suite::Chacha20Poly1305Sha256, &secret).unwrap();
        let packet = hex("4cfe4189655e5cd55c41f69080575d7999c25a5bfb");
        let sample = &packet[5..21];
        let mask = keys.mask(sample).unwrap();
        assert_eq!(mask, [0xae, 0xfe, 0xfe, 0x7d, 0x03]);
        let first = packet[0] ^ (mask[0] & 0x1f);
        assert_eq!(first, 0x42);
        let pn_len = (first & 3) as usize + 1;
        let mut header = vec![first];
        for (i, b) in packet[1..1 + pn_len].iter().enumerate() {
            header.push(b ^ mask[1 + i]);
        }
        assert_eq!(header, hex("4200bff4"));
        let plain = keys
            .open(654_360_564, &header, &packet[1 + pn_len..])
            .unwrap();
        assert_eq!(plain, hex("01"));
    }
}
