//! The link a lab emulates: [`quiclab_link::spec`], re-exported where the lab's users expect it.

pub use quiclab_link::spec::*;
