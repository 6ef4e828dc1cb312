//! The console's style sheet and scripts, served as files of their own (inside the
//! binary) rather than inline, so the Content-Security-Policy can allow scripts from
//! the console only (`script-src 'self'`, see [`crate::guard`]).

use axum::http::header;
use axum::response::IntoResponse;

/// Where the style sheet is served.
pub const STYLE_PATH: &str = "/static/console.css";
/// Where the refresh script is served.
pub const REFRESH_PATH: &str = "/static/refresh.js";
/// Where the session script (sign-in, sign-out, action forms) is served.
pub const SESSION_PATH: &str = "/static/session.js";
/// Where the player script (episode pages) is served.
pub const PLAYER_PATH: &str = "/static/player.js";

const STYLE: &str = r#"
body { font-family: system-ui, sans-serif; margin: 0; color: #1b1b1b; }
nav { background: #23395d; padding: .5em 1em; }
nav a { color: #fff; margin-right: 1.5em; text-decoration: none; font-weight: 600; }
main { padding: 1em 1.5em; max-width: 1200px; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.error, .failed { color: #a40000; }
.muted { color: #777; }
.example { font-size: .85em; color: #555; }
#stale { position: sticky; top: 0; background: #fff3cd; border: 1px solid #d9a400; color: #5c4400; padding: .5em 1em; margin: 0 0 1em; font-weight: 600; }
form.filter { display: flex; gap: .6em; flex-wrap: wrap; align-items: end; margin-bottom: 1em; }
form.filter label { display: flex; flex-direction: column; font-size: .85em; }
svg.timeline { width: 100%; height: auto; background: #f7f7f7; border: 1px solid #ccc; }
svg.timeline .mark { cursor: pointer; }
.charts { display: flex; gap: 1.5em; flex-wrap: wrap; align-items: flex-start; }
.charts figure { margin: 0; }
.charts figcaption { font-size: .9em; margin-bottom: .3em; }
.charts p { flex-basis: 100%; margin: 0; }
svg.chart { width: 480px; max-width: 100%; height: 96px; background: #f7f7f7; border: 1px solid #ccc; }
nav .who { color: #fff; margin-left: 1em; }
pre.message { white-space: pre-wrap; background: #fff4f4; padding: .5em; border: 1px solid #e0b4b4; }
"#;

/// Polls the page's own URL every `data-refresh` seconds and swaps in every element
/// marked `data-live` (by id) whose content changed, so tables stay current without
/// reloading the page (a playing episode or a half-typed filter is left alone, and an
/// unchanged block keeps its selection). Skipped while the tab is hidden or a form
/// field has the focus. A poll that fails (an error status, or no answer) puts a
/// banner on top of the page, `#stale`, saying what failed and when the page was last
/// read, until a poll succeeds again: an open page never looks current when it is not
/// (outside try of #24, F6: failures were dropped silently).
const REFRESH: &str = r#"
(function () {
  var s = Number(document.body.dataset.refresh || 0);
  if (!s) return;
  var good = new Date();
  function stamp(d) { return d.toISOString().replace(/\.\d+Z$/, "Z"); }
  function stale(why) {
    var b = document.getElementById("stale");
    if (!b) {
      b = document.createElement("p");
      b.id = "stale";
      b.setAttribute("role", "alert");
      document.querySelector("main").prepend(b);
    }
    b.textContent = "Not current: the refresh failed (" + String(why).slice(0, 300) +
      "). What is shown was read at " + stamp(good) + "; trying again every " + s + " s.";
  }
  setInterval(function () {
    var f = document.activeElement;
    if (document.hidden || (f && /INPUT|SELECT|TEXTAREA/.test(f.tagName))) return;
    fetch(location.href, { cache: "no-store" }).then(function (r) {
      return r.text().then(function (text) {
        if (r.ok) return text;
        var doc = new DOMParser().parseFromString(text, "text/html");
        var e = doc.querySelector(".error");
        throw new Error(r.status + " " + (e ? e.textContent : r.statusText));
      });
    }, function () {
      throw new Error("the console does not answer");
    }).then(function (text) {
      var fresh = new DOMParser().parseFromString(text, "text/html");
      document.querySelectorAll("[data-live]").forEach(function (old) {
        var next = fresh.getElementById(old.id);
        if (next && next.outerHTML !== old.outerHTML) old.replaceWith(next);
      });
      good = new Date();
      var b = document.getElementById("stale");
      if (b) b.remove();
    }).catch(function (e) { stale(e && e.message ? e.message : e); });
  }, s * 1000);
})();
"#;

/// Plays the episode from a mark: a click on anything with `data-t` (a timeline mark,
/// a row's play link) loads the player's media with the fragment `#t=SECONDS` and plays
/// it. One listener on the document, so marks swapped in by the refresh work too. A
/// player without a playable source (a media URL that is not http or https) is left
/// alone.
const PLAYER: &str = r##"
document.addEventListener("click", function (e) {
  var mark = e.target.closest && e.target.closest("[data-t]");
  var player = document.getElementById("player");
  if (!mark || !player || !player.dataset.src) return;
  e.preventDefault();
  player.src = player.dataset.src + "#t=" + mark.dataset.t;
  var p = player.play();
  if (p) p.catch(function () {});
});
"##;

/// Keeps the actions session in the tab, never in a cookie (outside try of #24, N0: a
/// cookie reached every port of the console's host). On the sign-in answer
/// (`body[data-session]`) it stores the token and name in `sessionStorage` and opens
/// the overview. On every page, when a `form.action` (a job's buttons, a bulk
/// confirmation) is submitted, it puts the token into the form's body as `session`;
/// without one it stops the post and says to sign in. A signed-in tab shows who it is
/// signed in as and a sign-out button, which forgets the token here and ends the
/// session on the console.
const SESSION: &str = r#"
(function () {
  var KEY = "archivist-session", WHO = "archivist-operator";
  var b = document.body;
  if (b.dataset.session) {
    sessionStorage.setItem(KEY, b.dataset.session);
    sessionStorage.setItem(WHO, b.dataset.operator || "");
    location.replace("/");
    return;
  }
  function token() { return sessionStorage.getItem(KEY) || ""; }
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (!f.classList || !f.classList.contains("action")) return;
    if (!token()) {
      e.preventDefault();
      alert("Not signed in in this tab: sign in at /login first.");
      return;
    }
    var old = f.querySelector("input[name=session]");
    if (old) old.remove();
    var i = document.createElement("input");
    i.type = "hidden"; i.name = "session"; i.value = token();
    f.appendChild(i);
  }, true);
  var nav = document.querySelector("nav");
  if (nav && token()) {
    var f = document.createElement("form");
    f.className = "action"; f.id = "logout"; f.method = "post"; f.action = "/logout";
    f.style.display = "inline";
    var s = document.createElement("span");
    s.className = "who";
    s.textContent = "signed in as " + (sessionStorage.getItem(WHO) || "") + " ";
    var btn = document.createElement("button");
    btn.type = "submit"; btn.textContent = "sign out";
    f.appendChild(s); f.appendChild(btn);
    f.addEventListener("submit", function () {
      setTimeout(function () { sessionStorage.removeItem(KEY); sessionStorage.removeItem(WHO); }, 0);
    });
    nav.appendChild(f);
  }
})();
"#;

/// `GET /static/session.js`.
pub async fn session() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SESSION,
    )
}

/// `GET /static/console.css`.
pub async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE)
}

/// `GET /static/refresh.js`.
pub async fn refresh() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        REFRESH,
    )
}

/// `GET /static/player.js`.
pub async fn player() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        PLAYER,
    )
}
