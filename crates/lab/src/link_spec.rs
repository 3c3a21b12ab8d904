//! The link a lab emulates: [`quiclab_link::spec`], re-exported where the lab's users expect it.

pub use quiclab_link::spec::*;

/// The link `options` ask for, a trace or profile file read with quiclab's checked reader
/// (`quiclab_outputs::input::read_input`: no devices, no oversized files).
pub fn of(options: &quiclab_link::LinkOptions) -> Result<LinkSpec, String> {
    options.to_spec(&quiclab_outputs::input::read_input)
}
