// text2reward dashboard: refresh the live part of a page when the run changes, without a reload.
// The server renders everything (escaped); this only polls a small JSON endpoint and swaps HTML.
(function () {
  "use strict";
  const POLL_MS = 2000;

  function keep(root) {
    // What the reader has done to the page, so a refresh does not undo it.
    const state = { open: new Set(), values: new Map(), videos: new Map() };
    root.querySelectorAll("details[data-key]").forEach((d) => { if (d.open) state.open.add(d.dataset.key); });
    root.querySelectorAll("details[data-key]:not([open])").forEach((d) => state.values.set("closed:" + d.dataset.key, true));
    root.querySelectorAll("textarea[data-key], input[data-key]").forEach((f) => { if (f.value) state.values.set(f.dataset.key, f.value); });
    root.querySelectorAll("video[data-key]").forEach((v) => state.videos.set(v.dataset.key, v));
    return state;
  }

  function restore(root, state) {
    root.querySelectorAll("details[data-key]").forEach((d) => {
      if (state.open.has(d.dataset.key)) d.open = true;
      else if (state.values.has("closed:" + d.dataset.key)) d.open = false;
    });
    root.querySelectorAll("textarea[data-key], input[data-key]").forEach((f) => {
      if (!f.value && state.values.has(f.dataset.key)) f.value = state.values.get(f.dataset.key);
    });
    root.querySelectorAll("video[data-key]").forEach((v) => {
      const old = state.videos.get(v.dataset.key);
      if (old && old.getAttribute("src") === v.getAttribute("src")) v.replaceWith(old); // keep playback
    });
  }

  function typing(live) {
    const active = document.activeElement;
    return active && live.contains(active) && (active.tagName === "TEXTAREA" || active.tagName === "INPUT");
  }

  async function poll() {
    const live = document.getElementById("live");
    if (!live || !live.dataset.statusUrl) return;
    try {
      const response = await fetch(live.dataset.statusUrl, { cache: "no-store", headers: { Accept: "application/json" } });
      if (response.ok) {
        const status = await response.json();
        if (status.signature !== live.dataset.signature && !typing(live)) {
          const fragment = await fetch(live.dataset.fragmentUrl, { cache: "no-store" });
          if (fragment.ok) {
            const doc = new DOMParser().parseFromString(await fragment.text(), "text/html");
            const fresh = doc.getElementById("live");
            if (fresh) {
              const state = keep(live);
              const node = document.adoptNode(fresh);
              live.replaceWith(node);
              restore(node, state);
              if (status.status) document.title = document.title.replace(/ · [^·]+ · /, " · " + status.status + " · ");
            }
          }
        }
      }
    } catch (err) {
      // The server may be restarting; try again at the next tick.
    }
    window.setTimeout(poll, POLL_MS);
  }

  document.addEventListener("submit", (event) => {
    const button = event.target.querySelector("button[type=submit]");
    if (button) { button.disabled = true; button.textContent = "Sending…"; }
  });

  // A refused form comes back with its message: bring it into view.
  const refused = document.querySelector("form .form-error");
  if (refused) refused.scrollIntoView({ block: "center" });

  window.setTimeout(poll, POLL_MS);
})();
