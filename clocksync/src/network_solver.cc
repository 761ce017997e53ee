#include "lockstep/clocksync/network_solver.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lockstep::clocksync {
namespace {

// Weighted Laplacian in CSR form (off-diagonals only; the diagonal is kept
// apart). The structure is built once; SetWeights() refills the values for each
// reweighting pass.
struct Laplacian {
  std::vector<uint32_t> start;  // size n + 1
  std::vector<uint32_t> col;
  std::vector<double> w;
  std::vector<double> diag;
  std::vector<uint32_t> slot;   // per input edge: its entry in a's row (b's is slot + 1 apart)
  std::vector<uint32_t> slot_b;

  Laplacian(uint32_t n, std::span<const NetworkEdge> edges) : start(n + 1, 0), diag(n, 0.0) {
    for (const NetworkEdge& e : edges) {
      if (e.weight <= 0) continue;
      ++start[e.a + 1];
      ++start[e.b + 1];
    }
    std::partial_sum(start.begin(), start.end(), start.begin());
    col.resize(start[n]);
    w.resize(start[n]);
    slot.assign(edges.size(), 0);
    slot_b.assign(edges.size(), 0);
    std::vector<uint32_t> fill(start.begin(), start.end() - 1);
    for (size_t k = 0; k < edges.size(); ++k) {
      const NetworkEdge& e = edges[k];
      if (e.weight <= 0) continue;
      slot[k] = fill[e.a];
      col[fill[e.a]++] = e.b;
      slot_b[k] = fill[e.b];
      col[fill[e.b]++] = e.a;
    }
  }

  void SetWeights(std::span<const NetworkEdge> edges, const std::vector<double>& weight) {
    std::fill(diag.begin(), diag.end(), 0.0);
    for (size_t k = 0; k < edges.size(); ++k) {
      if (edges[k].weight <= 0) continue;
      w[slot[k]] = w[slot_b[k]] = weight[k];
      diag[edges[k].a] += weight[k];
      diag[edges[k].b] += weight[k];
    }
  }

  void Apply(const std::vector<double>& x, std::vector<double>& y) const {
    const size_t n = diag.size();
    for (size_t i = 0; i < n; ++i) {
      double s = diag[i] * x[i];
      for (uint32_t k = start[i]; k < start[i + 1]; ++k) s -= w[k] * x[col[k]];
      y[i] = s;
    }
  }
};

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Jacobi-preconditioned CG on the (consistent, singular) system L x = rhs.
uint32_t Pcg(const Laplacian& lap, const std::vector<double>& rhs, const NetworkOptions& opt,
             std::vector<double>& x, bool& converged) {
  const size_t n = rhs.size();
  std::vector<double> r(n), z(n), p(n), ap(n);
  lap.Apply(x, ap);
  for (size_t i = 0; i < n; ++i) r[i] = rhs[i] - ap[i];
  const double stop = opt.tolerance * std::sqrt(Dot(rhs, rhs));
  // Returns the largest Jacobi-scaled residual |r_i / D_i|.
  auto precondition_max = [&] {
    double m = 0;
    for (size_t i = 0; i < n; ++i) {
      z[i] = lap.diag[i] > 0 ? r[i] / lap.diag[i] : 0.0;
      m = std::max(m, std::abs(z[i]));
    }
    return m;
  };
  converged = std::sqrt(Dot(r, r)) <= stop || precondition_max() <= opt.abs_tolerance;
  p = z;
  double rz = Dot(r, z);
  uint32_t it = 0;
  while (!converged && it < opt.max_iterations) {
    lap.Apply(p, ap);
    const double pap = Dot(p, ap);
    if (!(pap > 0)) break;
    const double alpha = rz / pap;
    for (size_t i = 0; i < n; ++i) {
      x[i] += alpha * p[i];
      r[i] -= alpha * ap[i];
    }
    ++it;
    const double zmax = precondition_max();
    if (zmax <= opt.abs_tolerance || std::sqrt(Dot(r, r)) <= stop) { converged = true; break; }
    const double rz_new = Dot(r, z);
    const double beta = rz_new / rz;
    rz = rz_new;
    for (size_t i = 0; i < n; ++i) p[i] = z[i] + beta * p[i];
  }
  return it;
}

uint32_t Find(std::vector<uint32_t>& parent, uint32_t v) {
  while (parent[v] != v) v = parent[v] = parent[parent[v]];
  return v;
}

}  // namespace

NetworkSolution SolveNetwork(uint32_t num_nodes, std::span<const NetworkEdge> edges,
                             const NetworkOptions& options, std::span<const double> warm_start) {
  NetworkSolution out;
  out.weight.resize(edges.size());
  for (size_t e = 0; e < edges.size(); ++e) out.weight[e] = std::max(0.0, edges[e].weight);

  // Components (union-find), numbered in order of their smallest NodeId.
  std::vector<uint32_t> parent(num_nodes);
  std::iota(parent.begin(), parent.end(), 0u);
  std::vector<uint8_t> touched(num_nodes, 0);
  for (size_t e = 0; e < edges.size(); ++e) {
    if (out.weight[e] <= 0) continue;
    touched[edges[e].a] = touched[edges[e].b] = 1;
    const uint32_t ra = Find(parent, edges[e].a), rb = Find(parent, edges[e].b);
    if (ra != rb) parent[std::max(ra, rb)] = std::min(ra, rb);
  }
  out.component.assign(num_nodes, kNoComponent);
  std::vector<uint32_t> root_comp(num_nodes, kNoComponent);
  for (uint32_t v = 0; v < num_nodes; ++v) {
    if (!touched[v]) continue;
    const uint32_t root = Find(parent, v);
    if (root_comp[root] == kNoComponent) root_comp[root] = out.num_components++;
    out.component[v] = root_comp[root];
  }

  out.x.assign(num_nodes, 0.0);
  if (warm_start.size() == num_nodes) {
    for (uint32_t v = 0; v < num_nodes; ++v) if (touched[v]) out.x[v] = warm_start[v];
  }
  Laplacian lap(num_nodes, edges);
  for (uint32_t pass = 0; pass <= options.robust_passes; ++pass) {
    if (pass > 0) {
      // Huber reweighting on normalized residuals u = r * sqrt(w0).
      std::vector<double> u;
      u.reserve(edges.size());
      for (size_t e = 0; e < edges.size(); ++e) {
        if (edges[e].weight > 0) u.push_back(std::abs(out.residual[e]) * std::sqrt(edges[e].weight));
      }
      if (u.empty()) break;
      std::nth_element(u.begin(), u.begin() + static_cast<std::ptrdiff_t>(u.size() / 2), u.end());
      const double scale = 1.4826 * u[u.size() / 2];
      if (!(scale > 0)) break;
      for (size_t e = 0; e < edges.size(); ++e) {
        if (edges[e].weight <= 0) continue;
        const double ue = std::abs(out.residual[e]) * std::sqrt(edges[e].weight);
        out.weight[e] = edges[e].weight * std::min(1.0, options.huber_k * scale / std::max(ue, 1e-300));
      }
    }
    lap.SetWeights(edges, out.weight);
    std::vector<double> rhs(num_nodes, 0.0);
    for (size_t e = 0; e < edges.size(); ++e) {
      if (out.weight[e] <= 0) continue;
      rhs[edges[e].b] += out.weight[e] * edges[e].value;
      rhs[edges[e].a] -= out.weight[e] * edges[e].value;
    }
    bool converged = false;
    out.iterations += Pcg(lap, rhs, options, out.x, converged);
    out.converged = out.converged && converged;

    // Gauge: mean zero per component.
    std::vector<double> sum(out.num_components, 0.0);
    std::vector<uint32_t> count(out.num_components, 0);
    for (uint32_t v = 0; v < num_nodes; ++v) {
      if (out.component[v] == kNoComponent) continue;
      sum[out.component[v]] += out.x[v];
      ++count[out.component[v]];
    }
    for (uint32_t v = 0; v < num_nodes; ++v) {
      if (out.component[v] != kNoComponent) out.x[v] -= sum[out.component[v]] / count[out.component[v]];
    }
    out.residual.resize(edges.size());
    for (size_t e = 0; e < edges.size(); ++e) {
      out.residual[e] = out.x[edges[e].b] - out.x[edges[e].a] - edges[e].value;
    }
  }
  return out;
}

}  // namespace lockstep::clocksync
