// The dashboard's runs and schedules pages, live: built on the helpers of dashboard.js, which
// loads first (both are deferred, and run in order). As there, text from the data only ever
// goes into the page through textContent, never as HTML.
'use strict';

// -- runs ------------------------------------------------------------------------------------

const TERMINAL = ['completed', 'failed', 'cancelled'];

// The workflows some live worker can run, from the workers' heartbeats.
async function runnable() {
  const { workers } = await api('/v1/workers');
  return new Set(workers.flatMap((w) => w.workflows));
}

// As stranded() in dashboard_runs.py: queued, and no live worker can run its workflow.
const stranded = (run, able) => run.status === 'queued' && !able.has(run.workflowId);

function runsPage() {
  const rows = document.getElementById('runs');
  const empty = document.getElementById('empty');
  const live = document.getElementById('live');
  const status = main.dataset.status;
  let able = new Set(JSON.parse(main.dataset.runnable));

  function row(run) {
    const link = el('a', '', run.runId);
    link.href = `/runs/${encodeURIComponent(run.runId)}`;
    const state = document.createDocumentFragment();
    state.append(badge('status', run.status));
    if (stranded(run, able)) state.append(' ', el('span', 'stranded', 'no live worker can run it'));
    const tr = rowOf([
      link, run.workflowId, state, shown('userId', run.userId),
      `${run.retryCount}/${run.maxRetries}`, shown('createdAt', run.createdAt),
      shown('updatedAt', run.updatedAt),
    ]);
    tr.dataset.runId = run.runId;
    tr.dataset.updated = run.updatedAt;
    tr.dataset.stranded = stranded(run, able) ? 'yes' : '';
    return tr;
  }

  // Polls the newest page: a run's story changes too often for a table row to need more.
  async function refresh() {
    const query = new URLSearchParams({ limit: '100' });
    if (status) query.set('status', status);
    try {
      const [{ runs }, workflows] = await Promise.all([api(`/v1/runs?${query}`), runnable()]);
      able = workflows;
      const old = new Map([...rows.rows].map((r) => [r.dataset.runId, r]));
      const fresh = runs.map((run) => {
        const before = old.get(run.runId);
        const same = before && before.dataset.updated === run.updatedAt
          && before.dataset.stranded === (stranded(run, able) ? 'yes' : '');
        if (same) return before;
        const made = row(run);
        made.className = 'changed';
        return made;
      });
      rows.replaceChildren(...fresh);
      empty.hidden = fresh.length > 0;
      live.textContent = 'live';
      live.className = 'live on';
    } catch (error) {
      live.textContent = 'reconnecting…';
      live.className = 'live';
    }
  }
  if (main.dataset.newest) {
    refresh();
    setInterval(refresh, 2000);
  } else {
    live.textContent = 'older runs';
  }
}

// An answer from the inputs the server built from the question's schema (dashboard_runs.py).
// A yes or no, or a choice, left unset is left out, or refused if the question needs it:
// nothing is decided for the person answering.
function answersOf(form) {
  const body = {};
  for (const input of form.querySelectorAll('[data-kind]')) {
    const { key, prop, kind, label } = input.dataset;
    const required = 'required' in input.dataset;
    let value;
    if (kind === 'boolean') {
      const picked = input.querySelector('input:checked');
      if (!picked) {
        if (required) throw new Error(`${key}: choose yes or no for “${label}”.`);
        continue;
      }
      value = picked.value === 'true';
    } else if (kind === 'enum') {
      if (input.value === '') {
        if (required) throw new Error(`${key}: choose one for “${label}”.`);
        continue;
      }
      value = JSON.parse(input.value);
    } else if (kind === 'number' || kind === 'integer') {
      if (input.value.trim() === '') continue;
      value = Number(input.value);
    } else if (kind === 'json') {
      try {
        value = JSON.parse(input.value);
      } catch {
        throw new Error(`The answer to ${key} is not valid JSON.`);
      }
    } else {
      if (input.value === '' && prop && !required) continue;
      value = input.value;
    }
    if (prop) {
      body[key] = body[key] ?? {};
      body[key][prop] = value;
    } else {
      body[key] = value;
    }
  }
  // An object whose properties are all optional and left empty is still an answer.
  for (const fieldset of form.querySelectorAll('fieldset.question')) {
    const single = fieldset.querySelector('[data-kind][data-prop=""]');
    if (!single && !(fieldset.dataset.key in body)) body[fieldset.dataset.key] = {};
  }
  return body;
}

function runPage() {
  let run = JSON.parse(main.dataset.run);
  const path = main.dataset.path;
  const log = document.getElementById('log');
  const steps = document.getElementById('steps');
  const errors = document.getElementById('errors');
  const answerForm = document.getElementById('answers');
  const cancel = document.getElementById('cancel');
  const answer = document.getElementById('answer');
  const noWorker = document.getElementById('no-worker');
  let able = new Set(JSON.parse(main.dataset.runnable));
  let lastSeq = lastSeqOf(log);
  let close = () => {};

  // The same words as no_worker_note() in dashboard_runs.py; shown while the run is queued
  // and no live worker can run its workflow.
  function showStranded() {
    noWorker.textContent = `No live worker can run the workflow “${run.workflowId}”: none `
      + 'seen recently has registered it. The run waits until a worker whose app registers it '
      + 'starts (longcall worker --app …); a worker without it that takes the run fails it.';
    noWorker.hidden = !stranded(run, able);
  }
  async function lookForWorkers() {
    if (run.status !== 'queued') return;
    able = await runnable();
    showStranded();
  }

  const pendingKey = (r) => JSON.stringify(r.pendingInterrupts.map((p) => [p.key, p.error]));

  function show(fresh) {
    if (older(fresh.updatedAt, run.updatedAt)) return;
    run = fresh;
    for (const node of main.querySelectorAll('[data-field]')) {
      const field = node.dataset.field;
      node.textContent = shown(field, run[field]);
      if (node.classList.contains('badge')) node.className = `badge ${field}-${run[field]}`;
    }
    errors.replaceChildren(...run.errors.map((e) => {
      const li = el('li');
      li.append(el('code', '', compact(e)));
      return li;
    }));
    steps.replaceChildren(...run.steps.map((s) => rowOf([
      String(s.position), s.name, s.ok ? 'ok' : 'failed', String(s.attempts),
      el('code', '', compact(s.result)), shown('finishedAt', s.finishedAt),
    ])));
    cancel.querySelector('fieldset').disabled = TERMINAL.includes(run.status);
    showStranded();
    if (pendingKey(run) !== main.dataset.pending) {
      // The run asks something else now: the form is built by the server from its schema.
      if (run.pendingInterrupts.length) {
        location.reload();
      } else {
        main.dataset.pending = pendingKey(run);
        answer.replaceChildren(el('h3', '', 'Answer'),
          el('p', 'note', 'The run is not waiting for an answer.'));
      }
    }
    if (TERMINAL.includes(run.status)) close('finished');
  }

  function addEvent(event) {
    if (event.seq <= lastSeq) return;
    lastSeq = event.seq;
    placeInLog(log, logEntry(event));
  }

  if (answerForm) {
    const code = answerForm.querySelector('.curl code');
    const refresh = () => {
      try {
        code.textContent = curl(`${location.origin}${path}/answers`, answersOf(answerForm));
      } catch (error) {
        code.textContent = `# ${error.message}`;
      }
    };
    answerForm.addEventListener('input', refresh);
    answerForm.addEventListener('change', refresh);
    answerForm.addEventListener('submit', async (event) => {
      event.preventDefault();
      const button = answerForm.querySelector('button');
      button.disabled = true;
      try {
        const answers = answersOf(answerForm);
        if (!(await confirmed(answerForm, JSON.stringify(answers, null, 2)))) {
          say('Nothing was sent; the run still waits for the answer.');
          return;
        }
        const queued = await api(`${path}/answers`, answers);
        say(`Answered; the run is ${queued.status}.`);
        show(queued);
      } catch (error) {
        say(error.message, true);
      } finally {
        button.disabled = false;
      }
    });
    refresh();
  }

  cancel.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      if (!(await confirmed(cancel))) {
        say('Nothing was sent; the run goes on.');
        return;
      }
      const after = await api(path, undefined, 'DELETE');
      const note = after.cancelRequested && !TERMINAL.includes(after.status)
        ? '; it stops at its next task call' : '';
      say(`The run is ${after.status}${note}.`);
      show(after);
    } catch (error) {
      say(error.message, true);
    }
  });

  // Opens with the run as it is now, then sends each new log entry and each change; it ends
  // once the run has completed, failed or been cancelled.
  if (TERMINAL.includes(run.status)) {
    document.getElementById('live').textContent = 'finished';
  } else {
    close = stream(`${path}/events?after=${lastSeq}`, { run: show, event: addEvent });
    const looking = setInterval(() => {
      if (TERMINAL.includes(run.status)) clearInterval(looking);
      else lookForWorkers().catch(() => {}); // the stream's own state says when it is down
    }, 5000);
  }
}

// -- schedules -------------------------------------------------------------------------------

const pausedBadge = (paused) => badge('paused', paused ? 'paused' : 'active');
// As next_fire() in dashboard_schedules.py: a paused schedule fires at no time.
const nextFire = (cron) => (cron.paused ? '— (paused)' : shown('nextFireAt', cron.nextFireAt));
// The same as local_time() in dashboard.py: 2025-03-30 03:00:00 +02:00.
const localTime = (text) => `${text.slice(0, 19).replace('T', ' ')} ${text.slice(19)}`;

// The same command as curl_as() in dashboard.py.
function curlAs(method, url, body) {
  const lines = [`curl -X ${method} ${shell(url)}`, '  -H "Authorization: Bearer $LONGCALL_TOKEN"'];
  if (body !== undefined) {
    lines.push("  -H 'Content-Type: application/json'", `  -d ${shell(compact(body))}`);
  }
  return lines.join(' \\\n');
}

// Polls `load` every two seconds while the page is open, saying in the header whether it can.
function poll(load) {
  const live = document.getElementById('live');
  const look = async () => {
    try {
      await load();
      live.textContent = 'live';
      live.className = 'live on';
    } catch (error) {
      live.textContent = 'reconnecting…';
      live.className = 'live';
    }
  };
  look();
  return setInterval(look, 2000);
}

function schedulesPage() {
  const rows = document.getElementById('schedules');
  const empty = document.getElementById('empty');

  function row(cron) {
    const link = el('a', '', cron.name);
    link.href = `/schedules/${encodeURIComponent(cron.cronId)}`;
    const tr = rowOf([
      link, cron.workflowId, cron.cronExpression, cron.timezone, cron.concurrencyPolicy,
      pausedBadge(cron.paused), nextFire(cron),
      String(cron.activeRunCount), String(cron.executionCount),
    ]);
    tr.dataset.cronId = cron.cronId;
    return tr;
  }

  if (!main.dataset.first) {
    document.getElementById('live').textContent = 'later page';
    return;
  }
  poll(async () => {
    const { crons } = await api('/v1/cron?limit=100');
    const old = new Map([...rows.rows].map((r) => [r.dataset.cronId, r]));
    rows.replaceChildren(...crons.map((cron) => {
      const before = old.get(cron.cronId);
      const made = row(cron);
      if (before && before.textContent === made.textContent) return before;
      if (before) made.className = 'changed';
      return made;
    }));
    empty.hidden = crons.length > 0;
  });
}

function schedulePage() {
  let cron = JSON.parse(main.dataset.cron);
  const path = main.dataset.path;
  const forms = Object.fromEntries(
    ['pause', 'unpause', 'trigger', 'delete'].map((id) => [id, document.getElementById(id)]),
  );
  let timer = null;

  function show(fresh) {
    cron = fresh;
    const fields = main.querySelectorAll('h1 [data-field], dl [data-field], pre [data-field]');
    for (const node of fields) {
      const field = node.dataset.field;
      if (field === 'paused') {
        node.replaceWith(pausedBadge(cron.paused));
      } else if (field === 'nextFireAt') {
        node.textContent = nextFire(cron);
      } else {
        node.textContent = shown(field, cron[field]);
      }
    }
    forms.pause.querySelector('fieldset').disabled = cron.paused;
    forms.unpause.querySelector('fieldset').disabled = !cron.paused;
    const next = document.getElementById('next');
    next.closest('table').hidden = cron.paused;
    document.getElementById('next-paused').hidden = !cron.paused;
    next.replaceChildren(...(cron.paused ? [] : cron.nextFireTimes).map(
      (t) => rowOf([localTime(t.local), shown('fireAt', t.utc)]),
    ));
    document.getElementById('fires').replaceChildren(...cron.recentFires.map((f) => {
      let run = '—';
      if (f.runId) {
        run = el('a', '', f.runId);
        run.href = `/runs/${encodeURIComponent(f.runId)}`;
      }
      return rowOf([shown('fireAt', f.fireAt), badge('outcome', f.outcome), run]);
    }));
  }

  // Each button does what the curl command beside it does.
  function act(form, method, url, body, done) {
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const button = form.querySelector('button');
      button.disabled = true;
      try {
        if (!(await confirmed(form))) {
          say('Nothing was sent; the schedule is as it was.');
          return;
        }
        const answer = await api(url, body, method);
        await done(answer);
      } catch (error) {
        say(error.message, true);
      } finally {
        button.disabled = false;
      }
    });
  }
  act(forms.pause, 'PATCH', path, { paused: true }, (answer) => {
    show(answer);
    say('Paused: nothing fires until it is unpaused.');
  });
  act(forms.unpause, 'PATCH', path, { paused: false }, (answer) => {
    show(answer);
    say(`Unpaused; the next fire is at ${shown('nextFireAt', answer.nextFireAt)} UTC.`);
  });
  act(forms.trigger, 'POST', `${path}/trigger`, undefined, async (answer) => {
    say(answer.runId
      ? `Started run ${answer.runId}.`
      : 'Skipped: a run of this schedule is still active.');
    show(await api(path));
  });
  act(forms.delete, 'DELETE', path, undefined, () => {
    clearInterval(timer);
    location.assign('/schedules');
  });
  timer = poll(async () => show(await api(path)));
}

if (main?.dataset.page === 'runs') runsPage();
if (main?.dataset.page === 'run') runPage();
if (main?.dataset.page === 'schedules') schedulesPage();
if (main?.dataset.page === 'schedule') schedulePage();
