//! quiclab-page: the sans-IO core of quiclab's page loads.
//!
//! - [`corpus`]: the built-in pages of the seed papers (Carlucci et al. 2015 §4.3, Megyesi et al.
//!   2016 §III), generated on demand with exact object sizes;
//! - [`discover`]: embedded objects from HTML and CSS, and pages read from a directory;
//! - [`schedule`]: the loader's decisions for HTTP/1.1 (6 connections), HTTP/2 and HTTP/3 (one
//!   multiplexed connection), driven by events and the caller's clock;
//! - [`har`]: HAR 1.2 output from per-object timings, and a validator;
//! - [`waterfall`]: waterfall figures (SVG, and PNG when a font is available).
//!
//! Only `write_to`, `load_dir`, `PageDir::read`, `Har::write_to` and `write_waterfall` touch files;
//! nothing here opens sockets or reads a clock.

pub mod corpus;
pub mod discover;
pub mod har;
pub mod kind;
pub mod schedule;
pub mod waterfall;

pub use corpus::{INDEX_PATH, ObjectSpec, PageError, PageSpec, builtin, builtin_names, lookup};
pub use discover::{
    DiscoverError, Origin, PageDir, Reference, Via, discover_css, discover_html, load_dir,
};
pub use har::{Har, HarPage, ObjectTiming, build_har, validate};
pub use kind::{ObjectKind, content_type_for_path};
pub use schedule::{
    Action, ConnId, ConnRecord, LoadConfig, LoadPlan, ObjectRecord, Protocol, Queueing,
    ScheduleError,
};
pub use waterfall::{WaterfallOptions, WaterfallOutput, write_waterfall};
