//! FileBackend: sessions as .cslog files of COBS-framed, CRC-checked postcard records
//!
//! Being built: see the issue tracker.
#![forbid(unsafe_code)]
