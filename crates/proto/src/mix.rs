//! Mixes of things sharing one bottleneck (competing flows, several video players): how a mix is
//! written (`h3 + h1 + h1`) and how it is labelled as a run's contender (`h3+h1x2`).

/// The parts of a mix written joined by `+` (`h3:gquic-cubic + h1`), trimmed. An empty part
/// (`h3 +`, `h3 ++ h1`) is an error: dropping it would run another mix than the one written.
pub fn split_joined(s: &str) -> Result<Vec<&str>, String> {
    let parts: Vec<&str> = s.split('+').map(str::trim).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(format!(
            "{s:?} has an empty part before, between or after its '+' signs: write each member \
             once, joined by '+' (e.g. h3 + h1)"
        ));
    }
    Ok(parts)
}

/// A contender label from the members' labels, in order: runs of equal labels as `LABELxN`,
/// joined by `+` (`h3+h1`, `h3x2+h1x2`).
pub fn label<I: IntoIterator<Item = String>>(labels: I) -> String {
    let mut parts: Vec<(String, usize)> = Vec::new();
    for l in labels {
        match parts.last_mut() {
            Some((last, n)) if *last == l => *n += 1,
            _ => parts.push((l, 1)),
        }
    }
    parts
        .into_iter()
        .map(|(l, n)| if n == 1 { l } else { format!("{l}x{n}") })
        .collect::<Vec<_>>()
        .join("+")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_split_on_plus_and_label_runs_of_equals() {
        assert_eq!(split_joined(" h3 + h1 +h1 ").unwrap(), ["h3", "h1", "h1"]);
        for bad in ["h3 +", "+ h3", "h3 ++ h1", "", " "] {
            assert!(split_joined(bad).is_err(), "{bad:?}");
        }
        let l = |v: &[&str]| label(v.iter().map(|s| s.to_string()));
        assert_eq!(l(&["h3", "h1", "h1"]), "h3+h1x2");
        assert_eq!(l(&["h1", "h3", "h1"]), "h1+h3+h1");
        assert_eq!(l(&["h3"]), "h3");
        assert_eq!(l(&[]), "");
    }
}
