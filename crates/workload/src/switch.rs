//! What each network switch cost a download or a player: quiclab-model's (`switch`), computed from
//! the client's timeline and the schedule.

pub use quiclab_model::switch::*;
