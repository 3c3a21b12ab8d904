//! Sans-IO core of adaptive video streaming (DASH), for seed 004 (Arisu et al. 2019).
//!
//! - [`content`]: what the server offers (segment duration, bitrate ladder, every segment's
//!   size); built-in Big Buck Bunny ladders and Sabre's movie JSON.
//! - [`player`]: the player state machine on an explicit clock (buffer, startup, stalls, seeks,
//!   live availability) and its metrics with the seed's definitions.
//! - [`abr`]: BASIC, SARA and BBA-2, as their papers define them and as AStream implements them.
//! - [`spec`]: player specs (`h1/4`, `h2/2`, `h3`), mixes of players, seek lists, Range splits.
//!
//! Nothing here does I/O or reads a clock: the shell (`quiclab-stacks`' video client) downloads
//! and tells the player when; unit tests drive it in virtual time.

pub mod abr;
pub mod astream;
pub mod content;
pub mod player;
pub mod spec;

pub use abr::{ABR_NAMES, Abr, AbrKind};
pub use content::{BUILTIN_CONTENTS, Content, ContentError};
pub use player::{
    Action, Download, Player, PlayerConfig, PlayerEvent, PlayerMetrics, Seek, SeekCheck,
    SeekPolicy, SegmentRecord,
};
pub use spec::{PlayerMix, PlayerSpec, parse_seeks, split_ranges};
