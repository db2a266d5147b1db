//! See tests/tests/.
