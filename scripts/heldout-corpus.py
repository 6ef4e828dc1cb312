#!/usr/bin/env python3
"""Held-out matcher corpora from material the project's generator never made (issue 20).

Two splits built from independent sources, so the matcher can be tuned on one (A) and
judged on the other (B) without ever looking at B while tuning:

  split A: speech by espeak-ng (several voices), music by sox's synth (plucked chords,
           sine bass, noise drums), real stings from the Yaru sound theme;
  split B: speech by festival (kal diphone voice, several pitch shifts), music by
           ffmpeg's aevalsrc (FM organ and saw pads, sine-sweep kicks), real stings from
           the freedesktop sound theme and the ALSA test recordings.

Nothing is shared with daemons/testaudio/src/lib.rs, nor between the splits (the
freedesktop audio-channel-* files, copies of the ALSA recordings, are left out).
Speed changes use sox `speed` (pitch changes), tempo changes sox `tempo` (WSOLA).

Episodes per split (16 kHz mono, then LAME):
  whole     every clip 2x, spliced (half of those at -12 dB gain) or mixed 0/-6 dB
            under the bed; 10 dB SNR white noise over the whole episode; MP3 64 kbps mono.
  speed     every clip at speed 0.97, 0.98, 1.02, 1.03 (spliced); MP3 128 kbps.
  tempo     every clip at tempo 0.97 and 1.03, and the middle half of each clip of 3 s or
            more (spliced); MP3 128 kbps.
  clipfreeN beds only, MP3 64 kbps (N = 0.. --clipfree-episodes, --clipfree-min each).

Usage: scripts/heldout-corpus.py OUT_DIR [--seed N] [--clipfree-episodes K]
       [--clipfree-min M] [--splits A,B]
Needs: espeak-ng, festival (festvox-kallpc16k), sox, ffmpeg, lame,
sound-theme-freedesktop, yaru-theme-sound, alsa-utils' sounds (scripts/matcher-deps.sh).
Writes OUT_DIR/<split>/{episodes/*.mp3, clips/*.wav, truth.json}.
"""

import argparse
import array
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import wave

RATE = 16000

WORDS = """time people year way day man thing woman life child world school state family
student group country problem hand part place case week company system program question
work government number night point home water room mother area money story fact month lot
right study book eye job word business issue side kind head house service friend father
power hour game line end member law car city community name president team minute idea
kid body information back parent face others level office door health person art war
history party result change morning reason research girl guy moment air teacher force
education river garden window music evening station radio signal morning weather market
""".split()


def run(cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def read_wav(path):
    """Mono 16-bit samples at RATE (sox converts anything first)."""
    with tempfile.NamedTemporaryFile(suffix=".wav", delete=False) as t:
        tmp = t.name
    try:
        run(["sox", path, "-r", str(RATE), "-c", "1", "-b", "16", "-e", "signed", tmp])
        with wave.open(tmp, "rb") as w:
            data = array.array("h", w.readframes(w.getnframes()))
        if sys.byteorder == "big":
            data.byteswap()
        return array.array("f", (v / 32768.0 for v in data))
    finally:
        os.unlink(tmp)


def write_wav(path, x):
    peak = max(1e-9, max(abs(v) for v in x)) if len(x) else 1.0
    g = min(1.0, 0.98 / peak)
    out = array.array("h", (int(max(-32767, min(32767, round(v * g * 32767)))) for v in x))
    if sys.byteorder == "big":
        out.byteswap()
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(out.tobytes())


def sox_fx(x, *effects):
    """Runs sox effects on samples (independent implementation of speed/tempo)."""
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "a.wav"), os.path.join(d, "b.wav")
        write_raw(a, x)
        run(["sox", a, b] + list(effects) + ["rate", str(RATE)])
        return read_wav(b)


def write_raw(path, x):
    out = array.array("h", (int(max(-32767, min(32767, round(v * 32767)))) for v in x))
    if sys.byteorder == "big":
        out.byteswap()
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(out.tobytes())


def rms(x):
    return math.sqrt(sum(v * v for v in x) / max(1, len(x)))


def sentence(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n)) + "."


# ---------------------------------------------------------------- speech


def speech_a(rng, text, d):
    voice = rng.choice(["en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-029", "en-gb-x-gbclan"])
    p = os.path.join(d, "s.wav")
    run(["espeak-ng", "-v", voice, "-s", str(rng.randint(140, 185)), "-p", str(rng.randint(30, 70)),
         "-w", p, text])
    return read_wav(p)


def speech_b(rng, text, d):
    p = os.path.join(d, "s.wav")
    run(["text2wave", "-o", p], input=text.encode())
    x = read_wav(p)
    cents = rng.choice([-300, -150, 0, 150, 300])
    return sox_fx(x, "pitch", str(cents)) if cents else x


# ---------------------------------------------------------------- music

SCALE = [0, 2, 4, 5, 7, 9, 11]


def hz(degree, octave, rng):
    """A major-scale degree in Hz (C of `octave`), detuned by up to 25 cents."""
    semis = SCALE[degree % 7] + 12 * (octave + degree // 7 - 4)
    return f"{261.63 * 2 ** ((semis + rng.uniform(-0.25, 0.25)) / 12):.2f}"


def music_a(rng, dur, d):
    """sox synth: plucked triads, a sine bass and noise-burst drums."""
    beat0 = rng.uniform(0.22, 0.32)
    parts = []
    t = 0.0
    k = 0
    while t < dur:
        root = rng.randrange(7)
        # Notes in Hz with a random detune (+-25 cents) and a random length: no two
        # passages of the music are sample-identical (with sox's deterministic pluck,
        # a repeated chord of the same length would be an exact copy).
        tri = [hz(root + i, 4, rng) for i in (0, 2, 4)]
        bass = hz(root, 2, rng)
        beat = beat0 * rng.uniform(0.8, 1.25)
        p = os.path.join(d, f"m{k}.wav")
        run(["sox", "-n", "-r", str(RATE), "-c", "1", p, "synth", f"{2 * beat:.3f}",
             "pluck", tri[0], "pluck", tri[1], "pluck", tri[2], "sine", bass, "remix", "-",
             "fade", "0.005", f"{2 * beat:.3f}", "0.05", "gain", "-6"])
        parts.append(p)
        if rng.random() < 0.5:
            q = os.path.join(d, f"n{k}.wav")
            run(["sox", "-n", "-r", str(RATE), "-c", "1", q, "synth", "0.06", "pinknoise",
                 "fade", "0", "0.06", "0.05", "pad", "0", f"{2 * beat - 0.06:.3f}", "gain", "-14"])
            r = os.path.join(d, f"r{k}.wav")
            run(["sox", "-m", p, q, r])
            parts[-1] = r
        t += 2 * beat
        k += 1
    out = os.path.join(d, "music.wav")
    # sox can concatenate many files at once.
    run(["sox"] + parts + [out])
    x = read_wav(out)
    return x[: int(dur * RATE)]


def music_b(rng, dur, d):
    """ffmpeg aevalsrc: FM organ chords and a saw pad over sine-sweep kicks."""
    bpm = rng.uniform(90, 130)
    beat = 60.0 / bpm
    # Chord roots detuned by up to 25 cents: no two pieces share exact pitches.
    freqs = [round(rng.choice([196.0, 220.0, 246.9, 261.6, 293.7, 329.6, 349.2])
                   * 2 ** (rng.uniform(-0.25, 0.25) / 12), 2) for _ in range(8)]
    bar = 4 * beat
    # Chord index changes every bar; expression picks the root with a piecewise sum.
    root = "+".join(
        f"{f}*between(mod(t,{8 * bar:.4f}),{i * bar:.4f},{(i + 1) * bar - 1e-4:.4f})"
        for i, f in enumerate(freqs)
    )
    mod_idx = rng.uniform(1.0, 3.0)
    expr = (
        f"0.25*sin(2*PI*({root})*t+{mod_idx:.2f}*sin(2*PI*2*({root})*t))"
        f"+0.12*sin(2*PI*1.5*({root})*t)"
        f"+0.08*(2*mod(0.5*({root})*t,1)-1)"
        f"+0.5*sin(2*PI*(50+120*exp(-30*mod(t,{beat:.4f})))*mod(t,{beat:.4f}))*exp(-12*mod(t,{beat:.4f}))"
    )
    out = os.path.join(d, "music.wav")
    # Commas separate filters in a lavfi graph: escape the expression's.
    expr = expr.replace(",", "\\,")
    run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
         f"aevalsrc={expr}:s={RATE}:d={dur:.3f}", "-ac", "1", out])
    return read_wav(out)


# ---------------------------------------------------------------- stings

YARU = "/usr/share/sounds/Yaru/stereo"
FREEDESKTOP = "/usr/share/sounds/freedesktop/stereo"
ALSA = "/usr/share/sounds/alsa"


def real_stings(split):
    """Real system sounds of 0.55-6.2 s (clips shorter than that are not stings)."""
    files = []
    if split == "A":
        dirs = [YARU]
    else:
        dirs = [FREEDESKTOP, ALSA]
    seen = set()
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if "audio-channel" in f or "audio-test-signal" in f or f == "Noise.wav":
                continue
            p = os.path.join(d, f)
            x = read_wav(p)
            dur = len(x) / RATE
            key = (round(dur, 2), round(rms(x), 4))
            if 0.55 <= dur <= 6.2 and key not in seen:
                seen.add(key)
                files.append((os.path.splitext(f)[0], x, p))
    return files


# ---------------------------------------------------------------- building


def bed(rng, split, dur, d):
    """Alternating speech and music sections of 20-60 s."""
    out = array.array("f")
    speech = speech_a if split == "A" else speech_b
    music = music_a if split == "A" else music_b
    want = int(dur * RATE)
    s = rng.random() < 0.5
    while len(out) < want:
        sec = rng.uniform(20, 60)
        if s:
            x = array.array("f")
            while len(x) < sec * RATE:
                x.extend(speech(rng, sentence(rng, rng.randint(8, 20)), d))
                x.extend(array.array("f", [0.0] * int(rng.uniform(0.2, 0.7) * RATE)))
            g = 0.1 / max(1e-6, rms(x))
        else:
            x = music(rng, sec, d)
            g = 0.1 / max(1e-6, rms(x))
        out.extend(v * g for v in x[: int(sec * RATE)])
        s = not s
    return out[:want]


def make_clips(rng, split, d):
    speech = speech_a if split == "A" else speech_b
    music = music_a if split == "A" else music_b
    clips = []
    for i in range(8):
        x = speech(rng, sentence(rng, rng.randint(3, 7)), d)
        # Trim leading/trailing silence of the TTS output.
        x = sox_fx(x, "silence", "1", "0.02", "0.5%", "reverse", "silence", "1", "0.02", "0.5%", "reverse")
        x = x[: int(4.0 * RATE)]
        clips.append((f"{split.lower()}drop{i}", "drop", x, "tts"))
    for i in range(6):
        dur = rng.uniform(3.0, 8.0)
        clips.append((f"{split.lower()}jingle{i}", "jingle", music(rng, dur, d), "synth"))
    for i in range(2):
        dur = rng.uniform(10.0, 20.0)
        clips.append((f"{split.lower()}theme{i}", "theme", music(rng, dur, d), "synth"))
    for name, x, path in real_stings(split):
        clips.append((f"{split.lower()}sting-{name}", "sting", x, path))
    out = []
    for name, kind, x, src in clips:
        g = 0.15 / max(1e-6, rms(x))
        out.append({"name": name, "kind": kind, "source": src, "x": array.array("f", (v * g for v in x))})
    return out


def place_all(rng, ep, placements, gap=1.5):
    """Places (clip name, audio, meta) at random non-overlapping positions; returns truth."""
    want = sum(len(a) for _, a, _ in placements) / RATE + gap * (len(placements) + 1)
    dur = len(ep) / RATE
    if want > 0.9 * dur:
        raise SystemExit(f"episode too short: {want:.0f} s of clips and gaps in {dur:.0f} s")
    slack = dur - want
    # Random cut points of the slack between the placements.
    cuts = sorted(rng.uniform(0, slack) for _ in placements)
    order = list(range(len(placements)))
    rng.shuffle(order)
    t = gap
    prev = 0.0
    truth = []
    for c, i in zip(cuts, order):
        name, a, meta = placements[i]
        t += c - prev
        prev = c
        at = int(round(t * RATE))
        mode = meta.get("mix_db")
        seg = ep[at:at + len(a)]
        gain = 10 ** (meta.get("gain_db", 0.0) / 20.0)
        if mode is None:
            # Splice with 5 ms crossfades.
            f = int(0.005 * RATE)
            for k, v in enumerate(a):
                w = min(1.0, (k + 1) / f, (len(a) - k) / f)
                ep[at + k] = ep[at + k] * (1 - w) + v * gain * w
        else:
            bg = rms(seg) or 0.1
            g = gain * bg * 10 ** (mode / 20.0) / max(1e-6, rms(a))
            for k, v in enumerate(a):
                ep[at + k] += v * g
        rec = dict(meta)
        rec.update({"clip": name, "offset_s": at / RATE})
        truth.append(rec)
        t += len(a) / RATE + gap
    truth.sort(key=lambda r: r["offset_s"])
    return truth


def add_noise(rng, x, snr_db):
    s = rms(x) * 10 ** (-snr_db / 20.0) * math.sqrt(3.0)
    for i in range(len(x)):
        x[i] += s * (2.0 * rng.random() - 1.0)


def encode(x, path, kbps, d):
    wav = os.path.join(d, "ep.wav")
    write_raw(wav, [max(-1.0, min(1.0, v)) for v in x])
    run(["lame", "--quiet", "-m", "m", "-b", str(kbps), "--resample", "44.1", wav, path])


def build_split(split, out, seed, clipfree_n, clipfree_min):
    rng = random.Random(seed * 1000 + ord(split))
    sd = os.path.join(out, split)
    os.makedirs(os.path.join(sd, "clips"), exist_ok=True)
    os.makedirs(os.path.join(sd, "episodes"), exist_ok=True)
    truth = {"split": split, "seed": seed, "clips": [], "episodes": []}
    with tempfile.TemporaryDirectory() as d:
        clips = make_clips(rng, split, d)
        for c in clips:
            f = os.path.join("clips", c["name"] + ".wav")
            write_wav(os.path.join(sd, f), c["x"])
            truth["clips"].append({"name": c["name"], "kind": c["kind"], "source": c["source"],
                                   "file": f, "duration_s": len(c["x"]) / RATE})
        # whole: every clip twice.
        pl = []
        for c in clips:
            for k in range(2):
                # Spliced (half of them at -12 dB gain) or mixed 0/-6 dB under the bed.
                mix = rng.choice([None, 0.0, -6.0])
                gain = -12.0 if mix is None and rng.random() < 0.5 else 0.0
                pl.append((c["name"], c["x"], {"variant": "whole", "speed": 1.0, "clip_start_s": 0.0,
                                               "clip_end_s": len(c["x"]) / RATE, "mix_db": mix,
                                               "gain_db": gain}))
        episodes = [("whole", pl, 10.0, 64)]
        pl = []
        for c in clips:
            for sp in (0.97, 0.98, 1.02, 1.03):
                a = sox_fx(c["x"], "speed", str(sp))
                pl.append((c["name"], a, {"variant": f"speed{sp}", "speed": sp, "clip_start_s": 0.0,
                                          "clip_end_s": len(c["x"]) / RATE}))
        episodes.append(("speed", pl, None, 128))
        pl = []
        for c in clips:
            for tp in (0.97, 1.03):
                a = sox_fx(c["x"], "tempo", str(tp))
                pl.append((c["name"], a, {"variant": f"tempo{tp}", "speed": tp, "clip_start_s": 0.0,
                                          "clip_end_s": len(c["x"]) / RATE}))
            n = len(c["x"])
            if n >= 3 * RATE:
                a = c["x"][n // 4: 3 * n // 4]
                pl.append((c["name"], a, {"variant": "partial", "speed": 1.0, "clip_start_s": (n // 4) / RATE,
                                          "clip_end_s": (3 * n // 4) / RATE}))
        episodes.append(("tempo", pl, None, 128))
        for name, pl, snr, kbps in episodes:
            need = sum(len(a) for _, a, _ in pl) / RATE + 1.5 * (len(pl) + 1)
            dur = max(120.0, need / 0.6)
            ep = bed(rng, split, dur, d)
            tr = place_all(rng, ep, pl)
            if snr is not None:
                add_noise(rng, ep, snr)
            f = os.path.join("episodes", name + ".mp3")
            encode(ep, os.path.join(sd, f), kbps, d)
            truth["episodes"].append({"name": name, "file": f, "duration_s": len(ep) / RATE,
                                      "clip_free": False, "occurrences": tr})
            print(f"{split}/{name}: {len(ep) / RATE:.0f} s, {len(tr)} placements", flush=True)
        for k in range(clipfree_n):
            ep = bed(rng, split, clipfree_min * 60.0, d)
            f = os.path.join("episodes", f"clipfree{k}.mp3")
            encode(ep, os.path.join(sd, f), 64, d)
            truth["episodes"].append({"name": f"clipfree{k}", "file": f, "duration_s": len(ep) / RATE,
                                      "clip_free": True, "occurrences": []})
            print(f"{split}/clipfree{k}: {len(ep) / RATE:.0f} s", flush=True)
    with open(os.path.join(sd, "truth.json"), "w") as fh:
        json.dump(truth, fh, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--clipfree-episodes", type=int, default=1)
    ap.add_argument("--clipfree-min", type=float, default=15.0)
    ap.add_argument("--splits", default="A,B")
    a = ap.parse_args()
    for s in a.splits.split(","):
        build_split(s.strip(), a.out, a.seed, a.clipfree_episodes, a.clipfree_min)


if __name__ == "__main__":
    main()
