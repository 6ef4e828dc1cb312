//! The catalog: episodes, clips and their aliases (tables `episodes`, `clips`,
//! `aliases`). Filled by issue #22's catalog part.
