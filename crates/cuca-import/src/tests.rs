//! Unit tests of the line reader and the usage mapping.
