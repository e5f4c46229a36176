// The staff console's only script: confirmations, select-all and replay-job progress.
"use strict";

document.addEventListener("submit", (event) => {
  const form = event.target;
  let question = form.dataset.confirm;
  const button = event.submitter;
  if (form.dataset.confirmDiscard && button && button.value === "discard") {
    question = form.dataset.confirmDiscard;
  }
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

document.addEventListener("change", (event) => {
  if (event.target.matches("[data-select-all]")) {
    for (const box of document.querySelectorAll('input[name="ids"]')) {
      box.checked = event.target.checked;
    }
  }
});

// Poll a running replay job and move its progress bar without reloading the page.
const job = document.getElementById("replay-job");
if (job) {
  const bar = job.querySelector('[data-job="bar"]');
  const text = job.querySelector('[data-job="text"]');
  const percent = job.querySelector('[data-job="percent"]');
  const poll = async () => {
    try {
      const response = await fetch(job.dataset.statusUrl, { headers: { Accept: "application/json" } });
      if (response.ok) {
        const state = await response.json();
        bar.value = state.percent;
        percent.textContent = `${state.percent} %`;
        text.textContent = state.status === "finished"
          ? `finished: ${state.replayed} of ${state.total} replayed`
          : `${state.done} of ${state.total} handled`;
        if (state.status === "finished") {
          if ("running" in job.dataset) {
            // The rows below were drawn before the replay: draw them again as they are
            // now. The reloaded page shows the job finished, so this happens once.
            window.location.reload();
            return;
          }
          job.querySelector('[data-job="refresh"]').hidden = false;
          return;
        }
      }
    } catch (error) {
      // A blip of the network: try again on the next tick.
    }
    window.setTimeout(poll, 1000);
  };
  poll();
}
