// Opens a portal link: its one-time secret is in the URL fragment, which the browser never
// sends to a server. Post it once to be exchanged for a session cookie, and drop it from
// the address bar and history first.
"use strict";

const form = document.getElementById("portal-exchange");
if (form) {
  const secret = window.location.hash.slice(1);
  if (secret) {
    window.history.replaceState(null, "", window.location.pathname);
    form.elements.link.value = secret;
    document.getElementById("opening").hidden = false;
    document.getElementById("no-session").hidden = true;
    form.submit();
  } else if (form.dataset.home) {
    window.location.replace(form.dataset.home);
  }
}
