#include "promql_refs.h"

#include <cctype>
#include <regex>

namespace lockstep::dashboards {
namespace {

enum class Kind { kIdent, kString, kNumber, kPunct };

struct Token {
  Kind kind;
  std::string text;  // a string's text is its unquoted value
};

bool IdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool IdentChar(char c) { return IdentStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<std::vector<Token>> Tokenize(std::string_view e) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < e.size()) {
    char c = e[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '#') {
      while (i < e.size() && e[i] != '\n') ++i;
    } else if (c == '"' || c == '\'' || c == '`') {
      std::string value;
      size_t j = i + 1;
      bool closed = false;
      for (; j < e.size(); ++j) {
        if (c != '`' && e[j] == '\\' && j + 1 < e.size()) {
          value += e[++j];
        } else if (e[j] == c) {
          closed = true;
          break;
        } else {
          value += e[j];
        }
      }
      if (!closed) return InvalidArgument("unterminated string at offset " + std::to_string(i));
      out.push_back({Kind::kString, value});
      i = j + 1;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < e.size() && std::isdigit(static_cast<unsigned char>(e[i + 1])))) {
      size_t j = i;
      while (j < e.size() && (std::isalnum(static_cast<unsigned char>(e[j])) || e[j] == '.' || e[j] == '_')) ++j;
      out.push_back({Kind::kNumber, std::string(e.substr(i, j - i))});
      i = j;
    } else if (IdentStart(c)) {
      size_t j = i;
      while (j < e.size() && IdentChar(e[j])) ++j;
      out.push_back({Kind::kIdent, std::string(e.substr(i, j - i))});
      i = j;
    } else if (c == '[') {  // a range or subquery: durations only
      size_t j = e.find(']', i);
      if (j == std::string_view::npos) return InvalidArgument("unterminated [ at offset " + std::to_string(i));
      i = j + 1;
    } else {
      static const char* kTwo[] = {"=~", "!~", "!=", "==", ">=", "<="};
      std::string op(1, c);
      for (const char* two : kTwo) {
        if (e.substr(i, 2) == two) op = two;
      }
      out.push_back({Kind::kPunct, op});
      i += op.size();
    }
  }
  return out;
}

bool Is(const std::vector<Token>& t, size_t i, const char* punct) {
  return i < t.size() && t[i].kind == Kind::kPunct && t[i].text == punct;
}

// Reads {label op "value", ...} starting at t[i] == "{"; returns the index after "}".
Result<size_t> ReadMatchers(const std::vector<Token>& t, size_t i, Selector& sel) {
  ++i;
  while (true) {
    if (Is(t, i, "}")) return i + 1;
    if (i >= t.size() || t[i].kind != Kind::kIdent) return InvalidArgument("expected a label name in a selector");
    const std::string label = t[i].text;
    if (i + 2 >= t.size() || t[i + 1].kind != Kind::kPunct || t[i + 2].kind != Kind::kString) {
      return InvalidArgument("expected label op \"value\" after " + label);
    }
    const std::string op = t[i + 1].text;
    if (label == "__name__") {
      if (op != "=") return InvalidArgument("a __name__ matcher other than = (" + op + ") cannot be checked by name");
      sel.metric = t[i + 2].text;
    } else {
      sel.matchers.insert(label);
    }
    i += 3;
    if (Is(t, i, ",")) ++i;
  }
}

bool IsAggregation(const std::string& low) {
  static const std::set<std::string> kOps = {"sum",    "min",   "max",     "avg",  "group",        "stddev",
                                             "stdvar", "count", "bottomk", "topk", "count_values", "quantile"};
  return kOps.count(low) > 0;
}

struct Frame {
  std::string func;  // empty for plain parentheses
  int arg = 0;
};

}  // namespace

Result<PromqlRefs> ExtractRefs(std::string_view expr) {
  auto toks = Tokenize(expr);
  if (!toks.ok()) return toks.error();
  const std::vector<Token>& t = *toks;
  PromqlRefs refs;
  std::vector<Frame> stack;
  std::string pending_func;
  size_t i = 0;
  while (i < t.size()) {
    const Token& tok = t[i];
    if (tok.kind == Kind::kIdent) {
      const std::string low = Lower(tok.text);
      if (low == "by" || low == "without" || low == "on" || low == "ignoring" || low == "group_left" ||
          low == "group_right") {
        ++i;
        if (!Is(t, i, "(")) continue;  // group_left without labels
        ++i;
        while (i < t.size() && !Is(t, i, ")")) {
          if (t[i].kind == Kind::kIdent) refs.grouping.insert(t[i].text);
          ++i;
        }
        if (i >= t.size()) return InvalidArgument("unbalanced ( after " + low);
        ++i;
        continue;
      }
      if (low == "and" || low == "or" || low == "unless" || low == "bool" || low == "offset" || low == "atan2" ||
          low == "inf" || low == "nan") {
        ++i;
        continue;
      }
      if (Is(t, i + 1, "(") || (IsAggregation(low) && i + 1 < t.size() && t[i + 1].kind == Kind::kIdent)) {
        pending_func = tok.text;  // a call; an aggregation may put by (...) before its (
        ++i;
        continue;
      }
      Selector sel{tok.text, {}};
      ++i;
      if (Is(t, i, "{")) {
        auto next = ReadMatchers(t, i, sel);
        if (!next.ok()) return next.error();
        i = *next;
      }
      refs.selectors.push_back(std::move(sel));
      continue;
    }
    if (tok.kind == Kind::kString && !stack.empty()) {
      const Frame& f = stack.back();
      if ((f.func == "label_replace" || f.func == "label_join") && f.arg == 1) refs.created.insert(tok.text);
      if (f.func == "label_replace" && f.arg == 3 && !tok.text.empty()) refs.sources.insert(tok.text);
      if (f.func == "label_join" && f.arg >= 3) refs.sources.insert(tok.text);
      if (Lower(f.func) == "count_values" && f.arg == 0) refs.created.insert(tok.text);
    }
    if (tok.kind == Kind::kPunct) {
      if (tok.text == "(") {
        stack.push_back({pending_func, 0});
      } else if (tok.text == ",") {
        if (!stack.empty()) ++stack.back().arg;
      } else if (tok.text == ")") {
        if (stack.empty()) return InvalidArgument("unbalanced )");
        stack.pop_back();
      } else if (tok.text == "{") {
        Selector sel;
        auto next = ReadMatchers(t, i, sel);
        if (!next.ok()) return next.error();
        if (sel.metric.empty()) return InvalidArgument("a selector without a metric name");
        refs.selectors.push_back(std::move(sel));
        i = *next;
        pending_func.clear();
        continue;
      } else if (tok.text == "}") {
        return InvalidArgument("unbalanced }");
      }
    }
    pending_func.clear();
    ++i;
  }
  if (!stack.empty()) return InvalidArgument("unbalanced (");
  return refs;
}

std::string SubstituteGrafana(std::string_view q, std::set<std::string>* vars) {
  auto replace = [&](const std::string& name) -> std::string {
    if (name == "__rate_interval" || name == "__interval" || name == "__range") return "5m";
    if (vars) vars->insert(name);
    return ".+";
  };
  std::string out;
  size_t i = 0;
  while (i < q.size()) {
    if (q[i] == '$' && i + 1 < q.size() && q[i + 1] == '{') {
      size_t end = q.find('}', i);
      if (end == std::string_view::npos) break;
      std::string name(q.substr(i + 2, end - i - 2));
      name = name.substr(0, name.find(':'));
      out += replace(name);
      i = end + 1;
    } else if (q[i] == '$' && i + 1 < q.size() && IdentStart(q[i + 1]) && q[i + 1] != ':') {
      size_t j = i + 1;
      while (j < q.size() && (std::isalnum(static_cast<unsigned char>(q[j])) || q[j] == '_')) ++j;
      out += replace(std::string(q.substr(i + 1, j - i - 1)));
      i = j;
    } else if (q.substr(i, 2) == "[[" && q.find("]]", i) != std::string_view::npos) {
      size_t end = q.find("]]", i);
      std::string name(q.substr(i + 2, end - i - 2));
      out += replace(name.substr(0, name.find(':')));
      i = end + 2;
    } else {
      out += q[i++];
    }
  }
  out += q.substr(i);
  return out;
}

std::set<std::string> LegendLabels(std::string_view legend) {
  static const std::regex kRef(R"(\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\})");
  std::set<std::string> out;
  std::string s(legend);
  for (std::sregex_iterator it(s.begin(), s.end(), kRef), end; it != end; ++it) out.insert((*it)[1].str());
  return out;
}

}  // namespace lockstep::dashboards
