//! Warped detector (stub, replaced below).
use crate::features::{FeatureIndex, Features};
use crate::matcher::{MatchConfig, Occurrence};
use crate::ncc::PreparedClip;

pub(crate) fn detect(
    _episode: &[f32],
    _index: &FeatureIndex,
    _clip: &PreparedClip,
    _qf: &Features,
    _cfg: &MatchConfig,
    _found: &[Occurrence],
) -> Vec<Occurrence> {
    Vec::new()
}
