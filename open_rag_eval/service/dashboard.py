"""The dashboard: server-rendered HTML, no build step, nothing fetched from elsewhere.

``/dashboard``: jobs with status and progress; ``/dashboard/jobs/{id}``: live progress (server-sent events) and then
the job's report; ``/dashboard/sweeps/{id}``: the trend of the sweep's thresholded metrics and its verdicts. With
auth on, ``/dashboard/login`` takes an API key and keeps it in an HttpOnly cookie.
"""

from __future__ import annotations

import asyncio
import json
import time
from html import escape
from typing import Any
from urllib.parse import parse_qs

import sqlalchemy as sa
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials

from open_rag_eval.service import jobs
from open_rag_eval.service.deps import COOKIE, engine_of, owned_row, principal
from open_rag_eval.service.db import sweeps
from open_rag_eval.service.keys import Principal, verify
from open_rag_eval.service.problems import Problem

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2430;color:#fff;padding:.7em 1.4em}header a{color:#fff;margin-right:1.2em}
main{padding:1.2em 1.4em;max-width:72em}table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;padding:.35em .6em;border-bottom:1px solid #e3e6ea}th{background:#eef0f3}
.status{font-weight:600}.completed{color:#1a7f37}.failed,.incomplete{color:#c0262d}.cancelled,.cancelling{color:#8a6d00}
.running{color:#0b5cad}.bar{background:#e3e6ea;height:.6em;width:12em;border-radius:.3em}
.bar>span{display:block;height:100%;background:#0b5cad;border-radius:.3em}
iframe{width:100%;height:80vh;border:1px solid #e3e6ea;background:#fff}.regression{color:#c0262d}
.stable{color:#1a7f37}.inconclusive{color:#8a6d00}svg{background:#fff;border:1px solid #e3e6ea}
"""


def _page(title: str, body: str, script: str = "") -> HTMLResponse:
    html = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'><link rel=icon href='data:,'><style>{STYLE}</style></head><body>"
            f"<header><a href='/dashboard'>Jobs</a><a href='/dashboard/sweeps'>Sweeps</a>"
            f"<span>open-rag-eval</span></header><main>{body}</main>"
            f"{f'<script>{script}</script>' if script else ''}</body></html>")
    return HTMLResponse(html, headers={"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'unsafe-inline'; "
                                       "script-src 'unsafe-inline'; frame-ancestors 'self'"})


async def _who(request: Request) -> Principal | None:
    from fastapi.security.utils import get_authorization_scheme_param

    scheme, token = get_authorization_scheme_param(request.headers.get("authorization", ""))
    credentials = HTTPAuthorizationCredentials(scheme=scheme, credentials=token) if scheme.lower() == "bearer" else None
    try:
        return await principal(request, credentials)
    except Problem:
        return None


def _percent(view: dict[str, Any]) -> float:
    progress = view["progress"] or {}
    stages = [s for s in progress.get("stages", []) if s not in ("read", "fetch", "write")]
    total = (progress.get("outputs_total") or 0) * max(len(stages), 1)
    if view["status"] in jobs.WITH_RESULTS:
        return 100.0
    done = sum(progress.get("done", {}).get(stage, 0) for stage in stages)
    return round(100.0 * done / total, 1) if total else 0.0


@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/dashboard")


@router.get("/dashboard")
async def jobs_page(request: Request) -> Response:
    who = await _who(request)
    if who is None:
        return RedirectResponse("/dashboard/login", status_code=303)
    from open_rag_eval.service.routes_jobs import job_view

    rows = [job_view(row) for row in await jobs.list_jobs(engine_of(request), who.tenant, limit=200)]
    lines = "".join(
        f"<tr data-job='{escape(v['id'])}'><td><a href='/dashboard/jobs/{escape(v['id'])}'>{escape(v['id'])}</a></td>"
        f"<td>{escape(v['kind'])}</td><td class='status {escape(v['status'])}'>{escape(v['status'])}</td>"
        f"<td><div class=bar><span style='width:{_percent(v)}%'></span></div> {_percent(v)}%</td>"
        f"<td>{v['n_outputs']}</td><td>{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(v['created']))}</td></tr>"
        for v in rows)
    body = (f"<h1>Jobs</h1><p>tenant <b>{escape(who.tenant)}</b></p><table id=jobs><thead><tr><th>job</th><th>kind</th>"
            f"<th>status</th><th>progress</th><th>outputs</th><th>created (UTC)</th></tr></thead><tbody>{lines}"
            "</tbody></table>" + ("" if rows else "<p id=empty>no jobs yet</p>"))
    active = any(v["status"] in jobs.ACTIVE for v in rows)
    return _page("open-rag-eval jobs", body, "setTimeout(()=>location.reload(),3000)" if active else "")


JOB_SCRIPT = """
let ended=false;
function show(p,status){const el=document.getElementById('status');if(status){el.textContent=status;el.className='status '+status}
 if(p){const stages=(p.stages||[]).filter(s=>!['read','fetch','write'].includes(s));const total=(p.outputs_total||0)*Math.max(stages.length,1);
 const done=stages.reduce((a,s)=>a+((p.done||{})[s]||0),0);const pct=total?Math.round(1000*done/total)/10:0;
 document.getElementById('pct').textContent=pct+'%';document.querySelector('#progress span').style.width=pct+'%';
 document.getElementById('stage').textContent=p.stage||''}}
const es=new EventSource('/v1/jobs/'+id+'/events');
es.addEventListener('progress',e=>show(JSON.parse(e.data),null));
es.addEventListener('status',e=>{const d=JSON.parse(e.data);show(null,d.status);
 if(['completed','incomplete','failed','cancelled'].includes(d.status)){ended=true;es.close();setTimeout(()=>location.reload(),300)}});
es.onerror=()=>{if(ended)es.close()};
"""


@router.get("/dashboard/jobs/{job_id}")
async def job_page(request: Request, job_id: str) -> Response:
    who = await _who(request)
    if who is None:
        return RedirectResponse("/dashboard/login", status_code=303)
    from open_rag_eval.service.routes_jobs import job_view

    row = await jobs.get_job(engine_of(request), who.tenant, job_id)
    if row is None:
        return HTMLResponse("<!doctype html><title>not found</title><h1>No such job</h1>", status_code=404)
    view = job_view(row)
    status = escape(view["status"])
    body = (f"<h1>Job {escape(job_id)}</h1><p>status <span id=status class='status {status}'>{status}</span> "
            f"<span id=stage></span></p><div id=progress class=bar><span style='width:{_percent(view)}%'></span></div>"
            f"<p id=pct>{_percent(view)}%</p>")
    if view["error"]:
        body += f"<p id=error class=failed>{escape(view['error'].get('code', ''))}: {escape(view['error'].get('detail', ''))}</p>"
    if view["status"] in jobs.WITH_RESULTS:
        links = " · ".join(f"<a href='/v1/jobs/{escape(job_id)}/{path}'>{label}</a>" for path, label in (
            ("results?format=csv", "results.csv"), ("results?format=json", "results.json"),
            ("summary", "summary.csv"), ("manifest", "manifest.json"), ("report", "report")))
        body += f"<p id=files>{links}</p><iframe id=report src='/v1/jobs/{escape(job_id)}/report'></iframe>"
    script = "" if view["status"] in jobs.TERMINAL else f"const id={json.dumps(job_id)};" + JOB_SCRIPT
    return _page(f"job {job_id}", body, script)


@router.get("/dashboard/sweeps")
async def sweeps_page(request: Request) -> Response:
    who = await _who(request)
    if who is None:
        return RedirectResponse("/dashboard/login", status_code=303)
    async with engine_of(request).connect() as connection:
        rows = (await connection.execute(sa.select(sweeps).where(sweeps.c.tenant == who.tenant)
                                         .order_by(sweeps.c.created))).mappings().all()
    lines = "".join(f"<tr><td><a href='/dashboard/sweeps/{escape(r['id'])}'>{escape(r['name'])}</a></td>"
                    f"<td>{escape(r['id'])}</td></tr>" for r in rows)
    return _page("open-rag-eval sweeps", f"<h1>Sweeps</h1><table id=sweeps><thead><tr><th>name</th><th>id</th></tr>"
                 f"</thead><tbody>{lines}</tbody></table>" + ("" if rows else "<p id=empty>no sweeps yet</p>"))


@router.get("/dashboard/sweeps/{sweep_id}")
async def sweep_page(request: Request, sweep_id: str) -> Response:
    who = await _who(request)
    if who is None:
        return RedirectResponse("/dashboard/login", status_code=303)
    from open_rag_eval.service.routes_sweeps import sweep_trend

    row = await owned_row(request, sweeps, who.tenant, sweep_id)
    if row is None:
        return HTMLResponse("<!doctype html><title>not found</title><h1>No such sweep</h1>", status_code=404)
    definition = json.loads(row["definition"])
    points = await asyncio.to_thread(sweep_trend, definition, 200)
    charts = "".join(_chart(metric, points) for metric in definition["thresholds"])
    lines = "".join(
        f"<tr><td>{escape(p['sweep'])}</td><td>{escape(p['started_at'])}</td>"
        f"<td class='verdict {escape(p['verdict'] or '')}'>{escape(p['verdict'] or '-')}</td>"
        + "".join(f"<td>{_number(p['metrics'].get(m))}</td>" for m in definition["thresholds"]) + "</tr>"
        for p in points)
    heads = "".join(f"<th>{escape(m)}</th>" for m in definition["thresholds"])
    body = (f"<h1>Sweep {escape(row['name'])}</h1>{charts}<table id=history><thead><tr><th>sweep</th>"
            f"<th>started (UTC)</th><th>verdict</th>{heads}</tr></thead><tbody>{lines}</tbody></table>")
    return _page(f"sweep {row['name']}", body)


def _number(aggregate: dict[str, Any] | None) -> str:
    return "-" if not aggregate or aggregate.get("mean") is None else f"{aggregate['mean']:.3f}"


def _chart(metric: str, points: list[dict[str, Any]]) -> str:
    """The metric's mean per sweep as an inline SVG line (a regression marked red)."""
    values = [(p["metrics"].get(metric) or {}).get("mean") for p in points]
    known = [v for v in values if v is not None]
    if not known:
        return f"<h2>{escape(metric)}</h2><p>no values yet</p>"
    low, high = min(known), max(known)
    span = (high - low) or 1.0
    width, height = 480, 120
    step = width / max(len(values) - 1, 1)
    coords = [(i * step, height - 10 - (v - low) / span * (height - 20)) for i, v in enumerate(values) if v is not None]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    dots = "".join(
        f"<circle cx='{x:.1f}' cy='{y:.1f}' r='4' class='point {escape(points[i]['verdict'] or '')}' "
        f"fill='{'#c0262d' if points[i]['verdict'] == 'regression' else '#0b5cad'}'/>"
        for i, (x, y) in zip([i for i, v in enumerate(values) if v is not None], coords))
    return (f"<h2>{escape(metric)}</h2><svg class=trend data-metric='{escape(metric)}' width={width + 20} "
            f"height={height} viewBox='-10 0 {width + 20} {height}'><polyline fill=none stroke='#0b5cad' "
            f"stroke-width=2 points='{line}'/>{dots}</svg><p>{low:.3f} – {high:.3f}</p>")


LOGIN = ("<h1>Sign in</h1><form method=post action='/dashboard/login'><label>API key <input name=key "
         "type=password autocomplete=off size=60></label> <button>Sign in</button></form>")


@router.get("/dashboard/login")
async def login_form() -> HTMLResponse:
    return _page("sign in", LOGIN)


@router.post("/dashboard/login")
async def login(request: Request) -> Response:
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    key = (form.get("key") or [""])[0].strip()
    if not key or await verify(engine_of(request), key) is None:
        return _page("sign in", "<p class=failed>that key is not valid</p>" + LOGIN)
    response = RedirectResponse("/dashboard", status_code=303)
    response.set_cookie(COOKIE, key, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response
