//! Parsing and formatting of the values users type on the command line and in profiles:
//! rates, durations, probabilities, queue sizes and loss models.
//!
//! Numbers are parsed as exact decimals (not through `f64`), so `1.5kB` is exactly 1500
//! bytes and `0.1mbit` is exactly 100 000 bit/s; nothing depends on binary floating-point
//! rounding. Error messages say what was expected, with examples and the accepted units,
//! and quote what was given; they never name a command-line flag because the caller knows
//! which flag it was and prefixes it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Nanos;

/// A value that could not be parsed. The message says what was expected and quotes the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct UnitError {
    message: String,
}

impl UnitError {
    /// The full human-readable message (same as `Display`).
    pub fn message(&self) -> &str {
        &self.message
    }

    fn expected(what: &str, got: &str) -> Self {
        UnitError {
            message: format!("expected {what}; got \"{got}\""),
        }
    }

    fn expected_with_hint(what: &str, got: &str, hint: &str) -> Self {
        UnitError {
            message: format!("expected {what}; got \"{got}\" ({hint})"),
        }
    }
}

const RATE_EXPECTED: &str = "a rate such as 10mbit, 500kbit, 1.5gbit or 20Mbps \
     (units: bit, kbit, mbit, gbit, Kbps, Mbps, Gbps)";
const DURATION_EXPECTED: &str =
    "a duration such as 25ms, 0.5ms, 130us or 1.5s (units: ns, us, µs, ms, s)";
const PROBABILITY_EXPECTED: &str =
    "a probability such as 2%, 0.5% or 0.02 (a percentage up to 100% or a fraction up to 1)";
const QUEUE_EXPECTED: &str = "a queue size such as 1bdp, 0.5bdp, 64kB, 100pkt or unlimited \
     (units: B, kB, KB, KiB, MB, MiB, pkt, pkts, bdp; or the word unlimited or inf)";
const LOSS_EXPECTED: &str = "a loss rate such as 1%, 0.5% or 0.02, or a Gilbert-Elliott model \
     such as ge:p=1%,r=30% (optional ,bad=100% and ,good=0%)";
const GE_EXPECTED: &str = "a Gilbert-Elliott loss model such as ge:p=1%,r=30% or \
     ge:p=1%,r=30%,bad=50%,good=0.1% (keys p, r, bad, good; each value a probability)";

/// An exact non-negative decimal number: `mantissa / 10^scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decimal {
    mantissa: u128,
    scale: u32,
}

/// More digits than this could overflow `u128` once multiplied by a unit; no sensible
/// value needs that many.
const MAX_SIGNIFICANT_DIGITS: usize = 30;

impl Decimal {
    /// `self × multiplier`, rounded to the nearest integer (halves round up), and whether
    /// the product was already whole. `None` on overflow.
    fn times(self, multiplier: u128) -> Option<(u128, bool)> {
        let product = self.mantissa.checked_mul(multiplier)?;
        let divisor = 10u128.checked_pow(self.scale)?;
        let quotient = product / divisor;
        let remainder = product % divisor;
        let rounded = if remainder * 2 >= divisor {
            quotient.checked_add(1)?
        } else {
            quotient
        };
        Some((rounded, remainder == 0))
    }

    fn is_zero(self) -> bool {
        self.mantissa == 0
    }

    /// Whether `self / 10^extra_scale <= 1`, computed exactly.
    fn at_most_one(self, extra_scale: u32) -> bool {
        match 10u128.checked_pow(self.scale + extra_scale) {
            Some(one) => self.mantissa <= one,
            // 10^scale overflowing means scale is huge, so the mantissa (bounded by
            // MAX_SIGNIFICANT_DIGITS digits) is certainly smaller.
            None => true,
        }
    }

    fn to_f64(self, extra_scale: u32) -> f64 {
        // Dividing two exactly representable values gives the correctly rounded result,
        // so "0.12%" becomes the same f64 as the literal 0.0012.
        self.mantissa as f64 / 10f64.powi((self.scale + extra_scale) as i32)
    }
}

/// Splits `"1.5mbit"` into the number and the unit text that follows it.
/// Accepts `123`, `1.5` and `.5`; rejects signs, exponents, `5.` and empty numbers.
fn split_number(s: &str) -> Option<(Decimal, &str)> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(end);
    let (int_part, frac_part) = match number.split_once('.') {
        Some((int_part, frac_part)) => {
            if frac_part.is_empty() || frac_part.contains('.') {
                return None;
            }
            (int_part, frac_part)
        }
        None => (number, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let int_digits = int_part.trim_start_matches('0');
    let frac_digits = frac_part.trim_end_matches('0');
    if int_digits.len() + frac_digits.len() > MAX_SIGNIFICANT_DIGITS {
        return None;
    }
    let mantissa = int_digits
        .bytes()
        .chain(frac_digits.bytes())
        .fold(0u128, |acc, digit| acc * 10 + u128::from(digit - b'0'));
    Some((
        Decimal {
            mantissa,
            scale: frac_digits.len() as u32,
        },
        unit,
    ))
}

/// Error for input that does not even start with a number, with a hint for the common
/// mistakes (negative values, missing unit).
fn not_a_number(expected: &str, input: &str) -> UnitError {
    if input.starts_with('-') {
        UnitError::expected_with_hint(expected, input, "negative values are not accepted")
    } else {
        UnitError::expected(expected, input)
    }
}

/// Parses a link rate into bits per second.
///
/// Accepts a number (integer or decimal) immediately followed by a unit:
/// `bit`, `kbit`, `mbit`, `gbit`, or `bps`, `Kbps`, `Mbps`, `Gbps` (all case-insensitive),
/// with k = 10^3, m = 10^6, g = 10^9.
///
/// Note: `Mbps` here means mega**bits** per second, as in everyday networking usage.
/// This differs from Linux `tc`, where `mbps` means mega**bytes** per second; use `mbit`
/// to be unambiguous. The result is rounded to the nearest bit/s and must be > 0.
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    let input = s.trim();
    let Some((number, unit)) = split_number(input) else {
        return Err(not_a_number(RATE_EXPECTED, input));
    };
    let multiplier: u128 = match unit.to_ascii_lowercase().as_str() {
        "bit" | "bps" => 1,
        "kbit" | "kbps" => 1_000,
        "mbit" | "mbps" => 1_000_000,
        "gbit" | "gbps" => 1_000_000_000,
        "" => {
            return Err(UnitError::expected_with_hint(
                RATE_EXPECTED,
                input,
                "the unit is missing",
            ));
        }
        _ => return Err(UnitError::expected(RATE_EXPECTED, input)),
    };
    let too_large = || UnitError::expected_with_hint(RATE_EXPECTED, input, "too large");
    let (bps, _) = number.times(multiplier).ok_or_else(too_large)?;
    let bps = u64::try_from(bps).map_err(|_| too_large())?;
    if bps == 0 {
        return Err(UnitError::expected_with_hint(
            RATE_EXPECTED,
            input,
            "a rate must be greater than 0; use unlimited for no rate limit",
        ));
    }
    Ok(bps)
}

/// Parses a duration into nanoseconds: a number (integer or decimal) immediately followed
/// by `ns`, `us` (also `µs`), `ms` or `s`. Rounded to the nearest nanosecond; zero is
/// allowed. A bare number is rejected because its unit would be a guess.
pub fn parse_duration(s: &str) -> Result<Nanos, UnitError> {
    let input = s.trim();
    let Some((number, unit)) = split_number(input) else {
        return Err(not_a_number(DURATION_EXPECTED, input));
    };
    let multiplier: u128 = match unit.to_lowercase().as_str() {
        "ns" => 1,
        // U+00B5 MICRO SIGN and U+03BC GREEK SMALL LETTER MU look identical; accept both.
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "" => {
            return Err(UnitError::expected_with_hint(
                DURATION_EXPECTED,
                input,
                "the unit is missing",
            ));
        }
        _ => return Err(UnitError::expected(DURATION_EXPECTED, input)),
    };
    let too_large = || UnitError::expected_with_hint(DURATION_EXPECTED, input, "too large");
    let (nanos, _) = number.times(multiplier).ok_or_else(too_large)?;
    u64::try_from(nanos).map_err(|_| too_large())
}

/// Parses a probability: a percentage (`2%` → 0.02, `0.5%`) or a plain fraction (`0.02`).
/// Must be within [0, 1].
pub fn parse_probability(s: &str) -> Result<f64, UnitError> {
    parse_probability_expecting(s.trim(), PROBABILITY_EXPECTED)
}

/// Shared by [`parse_probability`] and [`parse_loss`] so each reports its own expectation.
fn parse_probability_expecting(input: &str, expected: &str) -> Result<f64, UnitError> {
    let (number_text, percent) = match input.strip_suffix('%') {
        Some(number_text) => (number_text, true),
        None => (input, false),
    };
    let Some((number, rest)) = split_number(number_text) else {
        return Err(not_a_number(expected, input));
    };
    if !rest.is_empty() {
        return Err(UnitError::expected(expected, input));
    }
    let extra_scale = if percent { 2 } else { 0 };
    if !number.at_most_one(extra_scale) {
        let hint = if percent {
            "must be at most 100%"
        } else {
            "a fraction must be at most 1; write 2% or 0.02 for two percent"
        };
        return Err(UnitError::expected_with_hint(expected, input, hint));
    }
    Ok(number.to_f64(extra_scale))
}

/// The capacity of a link's tail-drop queue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum QueueLimit {
    /// At most this many bytes may wait.
    Bytes(u64),
    /// At most this many packets may wait.
    Packets(u64),
    /// A multiple of the bandwidth-delay product (rate × base RTT), resolved to bytes by
    /// the link model once the rate and RTT are known.
    Bdp(f64),
    /// No limit: nothing is ever tail-dropped.
    Unlimited,
}

impl fmt::Display for QueueLimit {
    /// Formats in the syntax [`parse_queue`] accepts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueLimit::Bytes(bytes) => write!(f, "{bytes}B"),
            QueueLimit::Packets(packets) => write!(f, "{packets}pkt"),
            QueueLimit::Bdp(k) => write!(f, "{k}bdp"),
            QueueLimit::Unlimited => write!(f, "unlimited"),
        }
    }
}

/// Parses a queue size: a number immediately followed by `B`, `kB`/`KB` (10^3), `KiB`
/// (2^10), `MB` (10^6), `MiB` (2^20), `pkt`/`pkts`, or `bdp` (a multiple of the
/// bandwidth-delay product, decimals allowed: `0.5bdp`); or the word `unlimited`/`inf`.
///
/// Byte units are case-sensitive because `kb`/`Mb` conventionally mean bits and would be
/// ambiguous. Bytes must be whole after scaling (`1.5kB` = 1500 is fine; `0.0001kB` is
/// not). Packets must be whole and at least 1. A bdp multiple must be greater than 0
/// (`0B` is the way to ask for a link with no waiting room).
pub fn parse_queue(s: &str) -> Result<QueueLimit, UnitError> {
    let input = s.trim();
    if input.eq_ignore_ascii_case("unlimited") || input.eq_ignore_ascii_case("inf") {
        return Ok(QueueLimit::Unlimited);
    }
    let Some((number, unit)) = split_number(input) else {
        return Err(not_a_number(QUEUE_EXPECTED, input));
    };
    let byte_multiplier: Option<u128> = match unit {
        "B" => Some(1),
        "kB" | "KB" => Some(1_000),
        "KiB" => Some(1_024),
        "MB" => Some(1_000_000),
        "MiB" => Some(1 << 20),
        _ => None,
    };
    if let Some(multiplier) = byte_multiplier {
        let too_large = || UnitError::expected_with_hint(QUEUE_EXPECTED, input, "too large");
        let (bytes, whole) = number.times(multiplier).ok_or_else(too_large)?;
        if !whole {
            return Err(UnitError::expected_with_hint(
                QUEUE_EXPECTED,
                input,
                "a size in bytes must come to a whole number of bytes",
            ));
        }
        return u64::try_from(bytes)
            .map(QueueLimit::Bytes)
            .map_err(|_| too_large());
    }
    match unit.to_ascii_lowercase().as_str() {
        "pkt" | "pkts" => {
            if number.scale != 0 {
                return Err(UnitError::expected_with_hint(
                    QUEUE_EXPECTED,
                    input,
                    "a number of packets must be whole",
                ));
            }
            if number.is_zero() {
                return Err(UnitError::expected_with_hint(
                    QUEUE_EXPECTED,
                    input,
                    "a number of packets must be at least 1; use 0B for no waiting room",
                ));
            }
            u64::try_from(number.mantissa)
                .map(QueueLimit::Packets)
                .map_err(|_| UnitError::expected_with_hint(QUEUE_EXPECTED, input, "too large"))
        }
        "bdp" => {
            if number.is_zero() {
                return Err(UnitError::expected_with_hint(
                    QUEUE_EXPECTED,
                    input,
                    "a bdp multiple must be greater than 0; use 0B for no waiting room",
                ));
            }
            Ok(QueueLimit::Bdp(number.to_f64(0)))
        }
        "" => Err(UnitError::expected_with_hint(
            QUEUE_EXPECTED,
            input,
            "the unit is missing",
        )),
        _ => Err(UnitError::expected(QUEUE_EXPECTED, input)),
    }
}

/// A random-loss model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum LossSpec {
    /// No random loss.
    None,
    /// Each packet is lost independently with this probability.
    Bernoulli(f64),
    /// Two-state Gilbert–Elliott model, evaluated once per packet.
    GilbertElliott {
        /// P(Good → Bad) per packet.
        p: f64,
        /// P(Bad → Good) per packet.
        r: f64,
        /// Loss probability in the Good state.
        loss_good: f64,
        /// Loss probability in the Bad state.
        loss_bad: f64,
    },
}

impl LossSpec {
    /// The long-run fraction of packets lost.
    ///
    /// For Gilbert–Elliott the chain's stationary distribution is πB = p/(p+r), πG = 1 − πB,
    /// so the mean is πG·good + πB·bad. With p = r = 0 the chain never leaves its initial
    /// Good state, so the mean is `loss_good`.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossSpec::None => 0.0,
            LossSpec::Bernoulli(p) => p,
            LossSpec::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                if p + r <= 0.0 {
                    return loss_good;
                }
                let pi_bad = p / (p + r);
                (1.0 - pi_bad) * loss_good + pi_bad * loss_bad
            }
        }
    }
}

impl fmt::Display for LossSpec {
    /// Formats in the syntax [`parse_loss`] accepts (`none` for no loss).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LossSpec::None => write!(f, "none"),
            LossSpec::Bernoulli(p) => write!(f, "{}", format_probability(p)),
            LossSpec::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => write!(
                f,
                "ge:p={},r={},bad={},good={}",
                format_probability(p),
                format_probability(r),
                format_probability(loss_bad),
                format_probability(loss_good)
            ),
        }
    }
}

/// Parses a loss model: a probability as in [`parse_probability`] (zero gives
/// [`LossSpec::None`]), or a Gilbert–Elliott model `ge:p=1%,r=30%` with optional
/// `,bad=100%` (loss in the Bad state, default 100%) and `,good=0%` (loss in the Good
/// state, default 0%). `p` is P(Good → Bad) and `r` is P(Bad → Good), per packet; keys may
/// come in any order.
pub fn parse_loss(s: &str) -> Result<LossSpec, UnitError> {
    let input = s.trim();
    let Some(params) = input
        .get(..3)
        .filter(|prefix| prefix.eq_ignore_ascii_case("ge:"))
        .map(|_| &input[3..])
    else {
        let probability = parse_probability_expecting(input, LOSS_EXPECTED)?;
        // A bare 1 is most likely "1 %" meant, and as a fraction it drops every packet (every
        // run would time out): a bare number is a fraction below 1; all loss takes "100%".
        if probability >= 1.0 && !input.ends_with('%') {
            return Err(UnitError::expected_with_hint(
                LOSS_EXPECTED,
                input,
                "a bare number is a fraction below 1 (0.01 is 1%); write 1% for one percent, or \
                 100% for a link that drops every packet",
            ));
        }
        return Ok(if probability == 0.0 {
            LossSpec::None
        } else {
            LossSpec::Bernoulli(probability)
        });
    };

    let (mut p, mut r, mut bad, mut good) = (None, None, None, None);
    for item in params.split(',') {
        let Some((key, value)) = item.split_once('=') else {
            return Err(UnitError::expected_with_hint(
                GE_EXPECTED,
                input,
                &format!("\"{}\" is not key=value", item.trim()),
            ));
        };
        let key = key.trim().to_ascii_lowercase();
        let slot = match key.as_str() {
            "p" => &mut p,
            "r" => &mut r,
            "bad" => &mut bad,
            "good" => &mut good,
            _ => {
                return Err(UnitError::expected_with_hint(
                    GE_EXPECTED,
                    input,
                    &format!("unknown key \"{key}\""),
                ));
            }
        };
        if slot.is_some() {
            return Err(UnitError::expected_with_hint(
                GE_EXPECTED,
                input,
                &format!("{key} is given twice"),
            ));
        }
        let value = value.trim();
        let value = parse_probability_expecting(value, PROBABILITY_EXPECTED).map_err(|_| {
            UnitError::expected_with_hint(
                GE_EXPECTED,
                input,
                &format!("{key} must be a probability within 0..100% or 0..1; got \"{value}\""),
            )
        })?;
        *slot = Some(value);
    }
    let missing =
        |key: &str| UnitError::expected_with_hint(GE_EXPECTED, input, &format!("{key} is missing"));
    if r == Some(0.0) && p.is_some_and(|p| p > 0.0) {
        return Err(UnitError::expected_with_hint(
            GE_EXPECTED,
            input,
            "r = 0 never leaves the Bad state once entered (a link that ends up dropping at the \
             bad rate for good); give r above 0",
        ));
    }
    Ok(LossSpec::GilbertElliott {
        p: p.ok_or_else(|| missing("p"))?,
        r: r.ok_or_else(|| missing("r"))?,
        loss_good: good.unwrap_or(0.0),
        loss_bad: bad.unwrap_or(1.0),
    })
}

/// Formats `value` in the largest unit it reaches, with up to three decimals and no
/// trailing zeros, so that the output reads naturally and parses back.
fn format_scaled(value: u64, units: &[(u64, &str)]) -> String {
    let (size, name) = units
        .iter()
        .copied()
        .find(|&(size, _)| value >= size)
        .or_else(|| units.last().copied())
        .unwrap_or((1, ""));
    let size = u128::from(size.max(1));
    let thousandths = (u128::from(value) * 1000 + size / 2) / size;
    let (whole, fraction) = (thousandths / 1000, thousandths % 1000);
    if fraction == 0 {
        format!("{whole}{name}")
    } else {
        let digits = format!("{fraction:03}");
        format!("{whole}.{}{name}", digits.trim_end_matches('0'))
    }
}

/// Formats a rate for reports: `10mbit`, `1.5mbit`, `500kbit`, `64bit` (at most three
/// decimals). The output is accepted by [`parse_rate`].
pub fn format_rate(bps: u64) -> String {
    format_scaled(
        bps,
        &[
            (1_000_000_000, "gbit"),
            (1_000_000, "mbit"),
            (1_000, "kbit"),
            (1, "bit"),
        ],
    )
}

/// Formats a duration for reports: `25ms`, `130us`, `1.5s`, `0ms` (at most three
/// decimals). The output is accepted by [`parse_duration`].
pub fn format_duration(ns: Nanos) -> String {
    if ns == 0 {
        return "0ms".to_string();
    }
    format_scaled(
        ns,
        &[
            (1_000_000_000, "s"),
            (1_000_000, "ms"),
            (1_000, "us"),
            (1, "ns"),
        ],
    )
}

/// Formats a probability as a percentage for reports: `0.12%`, `2%`, `100%` (at most four
/// decimals of a percent). The output is accepted by [`parse_probability`].
pub fn format_probability(p: f64) -> String {
    let text = format!("{:.4}", p * 100.0);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn assert_error_contains<T: fmt::Debug>(result: Result<T, UnitError>, needles: &[&str]) {
        let error = result.expect_err("expected a parse error");
        for needle in needles {
            assert!(
                error.to_string().contains(needle),
                "message {:?} should contain {:?}",
                error.to_string(),
                needle
            );
        }
    }

    #[test]
    fn rate_units() {
        assert_eq!(parse_rate("10mbit"), Ok(10_000_000));
        assert_eq!(parse_rate("500kbit"), Ok(500_000));
        assert_eq!(parse_rate("1.5gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate("20Mbps"), Ok(20_000_000));
        assert_eq!(parse_rate("20mbps"), Ok(20_000_000));
        assert_eq!(parse_rate("64Kbps"), Ok(64_000));
        assert_eq!(parse_rate("2Gbps"), Ok(2_000_000_000));
        assert_eq!(parse_rate("9600bit"), Ok(9600));
        assert_eq!(parse_rate("9600bps"), Ok(9600));
        assert_eq!(parse_rate("10MBIT"), Ok(10_000_000));
        assert_eq!(parse_rate("0.1mbit"), Ok(100_000));
        assert_eq!(parse_rate(".5mbit"), Ok(500_000));
        assert_eq!(parse_rate(" 3mbit "), Ok(3_000_000));
        // Rounded to the nearest bit/s.
        assert_eq!(parse_rate("1.0004kbit"), Ok(1000));
        assert_eq!(parse_rate("1.0005kbit"), Ok(1001));
    }

    #[test]
    fn rate_rejections_name_what_is_accepted() {
        let expected_message = "expected a rate such as 10mbit, 500kbit, 1.5gbit or 20Mbps \
             (units: bit, kbit, mbit, gbit, Kbps, Mbps, Gbps); got \"10mb\"";
        assert_eq!(
            parse_rate("10mb").unwrap_err().to_string(),
            expected_message
        );
        assert_error_contains(parse_rate("10"), &["got \"10\"", "the unit is missing"]);
        assert_error_contains(parse_rate("-1mbit"), &["negative"]);
        assert_error_contains(parse_rate(""), &["expected a rate", "got \"\""]);
        assert_error_contains(parse_rate("NaNmbit"), &["got \"NaNmbit\""]);
        assert_error_contains(parse_rate("infmbit"), &["expected a rate"]);
        assert_error_contains(parse_rate("0mbit"), &["greater than 0"]);
        assert_error_contains(parse_rate("0.0000001bit"), &["greater than 0"]);
        assert_error_contains(parse_rate("1e6bit"), &["expected a rate"]);
        assert_error_contains(parse_rate("1.2.3mbit"), &["expected a rate"]);
        assert_error_contains(parse_rate("5.mbit"), &["expected a rate"]);
        assert_error_contains(parse_rate("10 mbit"), &["expected a rate"]);
        assert_error_contains(parse_rate("99999999999999gbit"), &["too large"]);
        assert_error_contains(
            parse_rate("1234567890123456789012345678901234567890bit"),
            &["expected a rate"],
        );
    }

    #[test]
    fn duration_units() {
        assert_eq!(parse_duration("25ms"), Ok(25_000_000));
        assert_eq!(parse_duration("0.5ms"), Ok(500_000));
        assert_eq!(parse_duration("1.25s"), Ok(1_250_000_000));
        assert_eq!(parse_duration("130us"), Ok(130_000));
        assert_eq!(parse_duration("130µs"), Ok(130_000));
        assert_eq!(parse_duration("130\u{3bc}s"), Ok(130_000));
        assert_eq!(parse_duration("7ns"), Ok(7));
        assert_eq!(parse_duration("0ms"), Ok(0));
        assert_eq!(parse_duration("2s"), Ok(2_000_000_000));
        assert_eq!(parse_duration("1.5ns"), Ok(2), "rounded to the nearest ns");
    }

    #[test]
    fn duration_rejections() {
        assert_error_contains(
            parse_duration("25"),
            &[
                "expected a duration",
                "units: ns, us, µs, ms, s",
                "unit is missing",
            ],
        );
        assert_error_contains(parse_duration("-5ms"), &["negative"]);
        assert_error_contains(parse_duration("5min"), &["got \"5min\""]);
        assert_error_contains(parse_duration(""), &["expected a duration"]);
        assert_error_contains(parse_duration("ms"), &["expected a duration"]);
        assert_error_contains(parse_duration("99999999999999s"), &["too large"]);
    }

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("2%"), Ok(0.02));
        assert_eq!(parse_probability("0.5%"), Ok(0.005));
        assert_eq!(parse_probability("0.12%"), Ok(0.0012));
        assert_eq!(parse_probability("0.02"), Ok(0.02));
        assert_eq!(parse_probability("0"), Ok(0.0));
        assert_eq!(parse_probability("1"), Ok(1.0));
        assert_eq!(parse_probability("100%"), Ok(1.0));
        assert_error_contains(parse_probability("101%"), &["at most 100%"]);
        assert_error_contains(parse_probability("1.5"), &["at most 1"]);
        assert_error_contains(parse_probability("-1%"), &["negative"]);
        assert_error_contains(parse_probability("2 %"), &["expected a probability"]);
        assert_error_contains(parse_probability("abc"), &["got \"abc\""]);
        assert_error_contains(parse_probability(""), &["expected a probability"]);
        assert_error_contains(parse_probability("%"), &["expected a probability"]);
    }

    #[test]
    fn queue_sizes() {
        assert_eq!(parse_queue("1500B"), Ok(QueueLimit::Bytes(1500)));
        assert_eq!(parse_queue("0B"), Ok(QueueLimit::Bytes(0)));
        assert_eq!(parse_queue("64kB"), Ok(QueueLimit::Bytes(64_000)));
        assert_eq!(parse_queue("64KB"), Ok(QueueLimit::Bytes(64_000)));
        assert_eq!(parse_queue("1.5kB"), Ok(QueueLimit::Bytes(1500)));
        assert_eq!(parse_queue("64KiB"), Ok(QueueLimit::Bytes(65_536)));
        assert_eq!(parse_queue("2MB"), Ok(QueueLimit::Bytes(2_000_000)));
        assert_eq!(parse_queue("1MiB"), Ok(QueueLimit::Bytes(1_048_576)));
        assert_eq!(parse_queue("0.5KiB"), Ok(QueueLimit::Bytes(512)));
        assert_eq!(parse_queue("100pkt"), Ok(QueueLimit::Packets(100)));
        assert_eq!(parse_queue("100pkts"), Ok(QueueLimit::Packets(100)));
        assert_eq!(parse_queue("1pkt"), Ok(QueueLimit::Packets(1)));
        assert_eq!(parse_queue("1bdp"), Ok(QueueLimit::Bdp(1.0)));
        assert_eq!(parse_queue("0.5bdp"), Ok(QueueLimit::Bdp(0.5)));
        assert_eq!(parse_queue("2.25BDP"), Ok(QueueLimit::Bdp(2.25)));
        assert_eq!(parse_queue("unlimited"), Ok(QueueLimit::Unlimited));
        assert_eq!(parse_queue("inf"), Ok(QueueLimit::Unlimited));
    }

    #[test]
    fn queue_rejections() {
        assert_error_contains(parse_queue("1.0001kB"), &["whole number of bytes"]);
        assert_error_contains(parse_queue("1.5B"), &["whole number of bytes"]);
        assert_error_contains(parse_queue("1.5pkt"), &["packets must be whole"]);
        assert_error_contains(parse_queue("0pkt"), &["at least 1"]);
        assert_error_contains(parse_queue("0bdp"), &["greater than 0"]);
        assert_error_contains(parse_queue("64kb"), &["expected a queue size", "KiB"]);
        assert_error_contains(parse_queue("64"), &["unit is missing"]);
        assert_error_contains(parse_queue("-1pkt"), &["negative"]);
        assert_error_contains(parse_queue("lots"), &["got \"lots\""]);
        assert_error_contains(parse_queue("99999999999999999999999MiB"), &["too large"]);
    }

    #[test]
    fn queue_display_round_trips() {
        for limit in [
            QueueLimit::Bytes(62_500),
            QueueLimit::Packets(100),
            QueueLimit::Bdp(0.5),
            QueueLimit::Unlimited,
        ] {
            assert_eq!(parse_queue(&limit.to_string()), Ok(limit));
        }
    }

    #[test]
    fn loss_specs() {
        assert_eq!(parse_loss("0"), Ok(LossSpec::None));
        assert_eq!(parse_loss("0%"), Ok(LossSpec::None));
        assert_eq!(parse_loss("1%"), Ok(LossSpec::Bernoulli(0.01)));
        assert_eq!(parse_loss("0.02"), Ok(LossSpec::Bernoulli(0.02)));
        assert_eq!(
            parse_loss("ge:p=1%,r=30%"),
            Ok(LossSpec::GilbertElliott {
                p: 0.01,
                r: 0.3,
                loss_good: 0.0,
                loss_bad: 1.0
            })
        );
        assert_eq!(
            parse_loss("GE: r=0.3, p=1%, bad=50%, good=0.1%"),
            Ok(LossSpec::GilbertElliott {
                p: 0.01,
                r: 0.3,
                loss_good: 0.001,
                loss_bad: 0.5
            })
        );
    }

    #[test]
    fn loss_rejections() {
        assert_error_contains(
            parse_loss("lots"),
            &["expected a loss rate", "ge:p=1%,r=30%"],
        );
        assert_error_contains(
            parse_loss("150%"),
            &["expected a loss rate", "at most 100%"],
        );
        assert_error_contains(parse_loss("ge:p=1%"), &["r is missing"]);
        assert_error_contains(parse_loss("ge:r=1%"), &["p is missing"]);
        assert_error_contains(parse_loss("ge:p=1%,r=30%,x=2%"), &["unknown key \"x\""]);
        assert_error_contains(parse_loss("ge:p=1%,p=2%,r=3%"), &["p is given twice"]);
        assert_error_contains(parse_loss("ge:p=1%,r"), &["\"r\" is not key=value"]);
        assert_error_contains(
            parse_loss("ge:p=1%,r=130%"),
            &["r must be a probability", "got \"130%\""],
        );
        assert_error_contains(parse_loss("ge:"), &["not key=value"]);
    }

    #[test]
    fn loss_display_round_trips() {
        for text in ["0.12%", "ge:p=1%,r=30%,bad=50%,good=0.1%"] {
            let spec = parse_loss(text).unwrap();
            assert_eq!(spec.to_string(), text);
            assert_eq!(parse_loss(&spec.to_string()), Ok(spec));
        }
        assert_eq!(LossSpec::None.to_string(), "none");
    }

    #[test]
    fn mean_loss_is_the_stationary_loss() {
        assert_eq!(LossSpec::None.mean_loss(), 0.0);
        assert_eq!(LossSpec::Bernoulli(0.03).mean_loss(), 0.03);
        let ge = LossSpec::GilbertElliott {
            p: 0.01,
            r: 0.3,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        assert!((ge.mean_loss() - 0.01 / 0.31).abs() < 1e-12);
        let ge = LossSpec::GilbertElliott {
            p: 0.1,
            r: 0.1,
            loss_good: 0.02,
            loss_bad: 0.5,
        };
        assert!((ge.mean_loss() - 0.26).abs() < 1e-12);
        let stuck_good = LossSpec::GilbertElliott {
            p: 0.0,
            r: 0.0,
            loss_good: 0.05,
            loss_bad: 1.0,
        };
        assert_eq!(stuck_good.mean_loss(), 0.05);
    }

    #[test]
    fn formatting() {
        assert_eq!(format_rate(10_000_000), "10mbit");
        assert_eq!(format_rate(1_500_000), "1.5mbit");
        assert_eq!(format_rate(500_000), "500kbit");
        assert_eq!(format_rate(2_000_000_000), "2gbit");
        assert_eq!(format_rate(64), "64bit");
        assert_eq!(format_rate(0), "0bit");
        assert_eq!(format_rate(4_321_000), "4.321mbit");
        assert_eq!(format_rate(4_321_400), "4.321mbit");
        assert_eq!(format_duration(25_000_000), "25ms");
        assert_eq!(format_duration(130_000), "130us");
        assert_eq!(format_duration(1_500_000_000), "1.5s");
        assert_eq!(format_duration(0), "0ms");
        assert_eq!(format_duration(7), "7ns");
        assert_eq!(format_duration(1_234_567), "1.235ms");
        assert_eq!(format_probability(0.0012), "0.12%");
        assert_eq!(format_probability(1.0), "100%");
        assert_eq!(format_probability(0.0), "0%");
        for bps in [1, 999, 1_000, 1_500_000, 123_000_000] {
            assert_eq!(parse_rate(&format_rate(bps)), Ok(bps));
        }
        for ns in [1, 999, 1_000, 25_000_000, 1_500_000_000] {
            assert_eq!(parse_duration(&format_duration(ns)), Ok(ns));
        }
    }
}
