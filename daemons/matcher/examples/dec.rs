use std::time::Instant;
use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::DecoderOptions;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let t = Instant::now();
    let d = archivist_matcher::decode::decode_file(std::path::Path::new(&p)).unwrap();
    let e = t.elapsed().as_secs_f64();
    println!(
        "full: {} s audio in {e:.3} s = {:.0}x",
        d.duration_s,
        d.duration_s / e
    );
    let t = Instant::now();
    let mss = MediaSourceStream::new(
        Box::new(std::fs::File::open(&p).unwrap()),
        Default::default(),
    );
    let pr = symphonia::default::get_probe()
        .format(
            &Hint::new(),
            mss,
            &FormatOptions {
                enable_gapless: true,
                ..Default::default()
            },
            &MetadataOptions::default(),
        )
        .unwrap();
    let mut f = pr.format;
    let tr = f.default_track().unwrap().clone();
    let mut dec = symphonia::default::get_codecs()
        .make(&tr.codec_params, &DecoderOptions::default())
        .unwrap();
    let mut n = 0usize;
    let mut sb: Option<SampleBuffer<f32>> = None;
    let mut conv = 0.0;
    while let Ok(pk) = f.next_packet() {
        let b = dec.decode(&pk).unwrap();
        let t2 = Instant::now();
        let s = sb.get_or_insert_with(|| SampleBuffer::new(b.capacity() as u64, *b.spec()));
        s.copy_interleaved_ref(b);
        n += s.samples().len();
        conv += t2.elapsed().as_secs_f64();
    }
    let e = t.elapsed().as_secs_f64();
    println!("symphonia only: {n} samples in {e:.3} s (interleave copy {conv:.3} s)");
    let x = vec![0.1f32; 44100 * 600];
    let t = Instant::now();
    let y = archivist_matcher::dsp::resample_fixed(&x, 44100, 8000);
    println!(
        "resample 600 s: {:.3} s ({})",
        t.elapsed().as_secs_f64(),
        y.len()
    );
}
