"""Rewrite the vendored Kueue manifest for a Kueue manager running as a host process on 127.0.0.1:
webhook and CRD-conversion service references -> url https://127.0.0.1:PORT<path> with our CA; drop the Deployment
(the process replaces it) and the visibility APIServices (aggregated API served in-pod, unreachable here)."""
import base64, sys, yaml
src, ca, port, out = sys.argv[1:5]
cab = base64.b64encode(open(ca, "rb").read()).decode()
docs = [d for d in yaml.safe_load_all(open(src)) if d]
keep, dropped = [], []
def url(cc):
    svc = cc.pop("service"); cc["url"] = f"https://127.0.0.1:{port}{svc.get('path', '/')}"; cc["caBundle"] = cab
for d in docs:
    k = d["kind"]
    if k in ("Deployment", "APIService"):
        dropped.append(f"{k}/{d['metadata']['name']}"); continue
    if k in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for w in d["webhooks"]: url(w["clientConfig"])
    if k == "CustomResourceDefinition":
        conv = d["spec"].get("conversion") or {}
        if conv.get("strategy") == "Webhook": url(conv["webhook"]["clientConfig"])
    keep.append(d)
yaml.safe_dump_all(keep, open(out, "w"), sort_keys=False)
print("kept", len(keep), "dropped", dropped)
