//! Megyesi et al. 2016's Fig. 6: a decision tree over the settings of a grid, each setting
//! labelled by who won it ([`crate::judge::SettingWinners`]). The tree is grown greedily by
//! information gain (ID3 over the settings' parameters, each split on every value), so it is a
//! summary of the wins table, not a model: every leaf lists the labels of the settings it holds.

use std::collections::BTreeMap;

use serde::Serialize;

/// A node of the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "node", rename_all = "snake_case")]
pub enum Tree {
    /// The settings that reach this leaf: their labels and how many had each. `label` is the
    /// most common one (ties joined with " or ").
    Leaf {
        label: String,
        counts: BTreeMap<String, usize>,
    },
    /// One branch per value of `param`, in the values' natural order (2mbit before 10mbit).
    Split {
        param: String,
        branches: Vec<(String, Tree)>,
    },
}

impl Tree {
    /// The leaves (for layout).
    pub fn leaves(&self) -> usize {
        match self {
            Tree::Leaf { .. } => 1,
            Tree::Split { branches, .. } => branches.iter().map(|(_, t)| t.leaves()).sum(),
        }
    }

    pub fn depth(&self) -> usize {
        match self {
            Tree::Leaf { .. } => 1,
            Tree::Split { branches, .. } => {
                1 + branches.iter().map(|(_, t)| t.depth()).max().unwrap_or(0)
            }
        }
    }
}

impl std::fmt::Display for Tree {
    /// An indented outline, one line per branch (`rtt = 18ms → h1 (h1 3)`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fn leaf(label: &str, counts: &BTreeMap<String, usize>) -> String {
            let c: Vec<String> = counts.iter().map(|(l, n)| format!("{l} {n}")).collect();
            format!("→ {label} ({})", c.join(", "))
        }
        fn walk(t: &Tree, depth: usize, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match t {
                Tree::Leaf { label, counts } => writeln!(f, "{}", leaf(label, counts)),
                Tree::Split { param, branches } => {
                    for (value, sub) in branches {
                        let pad = "  ".repeat(depth);
                        match sub {
                            Tree::Leaf { label, counts } => {
                                writeln!(f, "{pad}{param} = {value} {}", leaf(label, counts))?
                            }
                            Tree::Split { .. } => {
                                writeln!(f, "{pad}{param} = {value}")?;
                                walk(sub, depth + 1, f)?
                            }
                        }
                    }
                    Ok(())
                }
            }
        }
        walk(self, 0, f)
    }
}

/// A value's sort key: its leading number when it has one (`10mbit` → 10), then the text.
fn natural(v: &str) -> (f64, String) {
    let digits: String = v
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (digits.parse().unwrap_or(f64::INFINITY), v.to_string())
}

fn entropy<'a>(labels: impl Iterator<Item = &'a String>) -> f64 {
    let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
    let mut n = 0usize;
    for l in labels {
        *counts.entry(l).or_default() += 1;
        n += 1;
    }
    counts
        .values()
        .map(|&c| {
            let p = c as f64 / n as f64;
            -p * p.log2()
        })
        .sum()
}

/// A setting's parameters and its label.
pub type Row = (BTreeMap<String, String>, String);

/// Grows the tree over `rows` (a setting's parameters → its label); None without rows. Every
/// row must name the same parameters.
pub fn grow(rows: &[Row]) -> Option<Tree> {
    if rows.is_empty() {
        return None;
    }
    let params: Vec<String> = rows[0].0.keys().cloned().collect();
    Some(grow_on(rows.iter().collect(), &params))
}

fn grow_on(rows: Vec<&Row>, params: &[String]) -> Tree {
    let whole = entropy(rows.iter().map(|r| &r.1));
    let mut best: Option<(f64, &String)> = None;
    if whole > 0.0 {
        for p in params {
            let mut parts: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
            for r in &rows {
                parts
                    .entry(r.0.get(p).map_or("", String::as_str))
                    .or_default()
                    .push(&r.1);
            }
            if parts.len() < 2 {
                continue;
            }
            let rest: f64 = parts
                .values()
                .map(|ls| ls.len() as f64 / rows.len() as f64 * entropy(ls.iter().copied()))
                .sum();
            let gain = whole - rest;
            // Strictly better only: ties go to the parameter named first.
            if gain > 1e-9 && best.is_none_or(|(g, _)| gain > g + 1e-12) {
                best = Some((gain, p));
            }
        }
    }
    let Some((_, param)) = best else {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for r in &rows {
            *counts.entry(r.1.clone()).or_default() += 1;
        }
        let top = counts.values().copied().max().unwrap_or(0);
        let label = counts
            .iter()
            .filter(|(_, c)| **c == top)
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>()
            .join(" or ");
        return Tree::Leaf { label, counts };
    };
    let mut parts: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        parts
            .entry(r.0.get(param).cloned().unwrap_or_default())
            .or_default()
            .push(r);
    }
    let mut values: Vec<String> = parts.keys().cloned().collect();
    values.sort_by(|a, b| {
        let (x, y) = (natural(a), natural(b));
        x.0.total_cmp(&y.0).then(x.1.cmp(&y.1))
    });
    let rest: Vec<String> = params.iter().filter(|p| *p != param).cloned().collect();
    Tree::Split {
        param: param.clone(),
        branches: values
            .into_iter()
            .map(|v| {
                let sub = parts.remove(&v).unwrap_or_default();
                (v, grow_on(sub, &rest))
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rate: &str, rtt: &str, label: &str) -> Row {
        (
            BTreeMap::from([
                ("rate".to_string(), rate.to_string()),
                ("rtt".to_string(), rtt.to_string()),
            ]),
            label.to_string(),
        )
    }

    #[test]
    fn the_tree_splits_on_what_decides_the_winner() {
        // RTT decides: h3 at 218 ms, h1 at 18 ms, whatever the rate.
        let rows = vec![
            row("2mbit", "18ms", "h1"),
            row("10mbit", "18ms", "h1"),
            row("2mbit", "218ms", "h3"),
            row("10mbit", "218ms", "h3"),
        ];
        let t = grow(&rows).unwrap();
        let Tree::Split { param, branches } = &t else {
            panic!("{t:?}")
        };
        assert_eq!(param, "rtt");
        assert_eq!(branches[0].0, "18ms");
        assert!(matches!(&branches[0].1, Tree::Leaf { label, .. } if label == "h1"));
        assert!(matches!(&branches[1].1, Tree::Leaf { label, .. } if label == "h3"));
        assert_eq!((t.leaves(), t.depth()), (2, 2));
        assert_eq!(
            t.to_string(),
            "rtt = 18ms → h1 (h1 2)\nrtt = 218ms → h3 (h3 2)\n"
        );
    }

    #[test]
    fn values_sort_naturally_and_mixed_leaves_say_so() {
        let rows = vec![
            row("10mbit", "18ms", "h1"),
            row("2mbit", "18ms", "h3"),
            row("50mbit", "18ms", "h1"),
            row("50mbit", "18ms", "h2"),
        ];
        let Some(Tree::Split { param, branches }) = grow(&rows) else {
            panic!()
        };
        assert_eq!(param, "rate");
        let values: Vec<&str> = branches.iter().map(|(v, _)| v.as_str()).collect();
        assert_eq!(values, ["2mbit", "10mbit", "50mbit"]);
        // 50mbit holds one h1 and one h2 setting and nothing left to split on.
        assert!(matches!(&branches[2].1, Tree::Leaf { label, .. } if label == "h1 or h2"));
        assert_eq!(grow(&[]), None);
    }
}
