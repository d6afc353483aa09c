"""`make cluster-test`: "would it run?" answered by the upstream code itself.

The real Kubernetes control plane (kube-apiserver, kube-controller-manager, kube-scheduler at v1.34.12, etcd
v3.6.5), kwok v0.8.0 for the nodes and the pod lifecycle, and the pinned operators (Kueue, training-operator,
JobSet, Kubeflow Trainer) as processes, all built from their Go modules (`build`, gomod/<component>/go.mod); each
stack's cluster.yaml applied for real (`run`), recorded in cluster-run.json with the simulation's check names and
held against simulation.json (`compare`). Modules: build (cached Go builds), control_plane (PKI, processes,
cleanup), nodes (kwok Nodes from verify/simulate's node groups), operators (the operators' process rules), api
(server-side apply per object), run (apply order, explicit replacement rules, the checks), compare.
"""
