// NetApi: one NCCL network plugin loaded with dlopen, its v8, v9 or v10 table
// seen through one set of calls (v10's shapes), as NCCL's own net.cc does.
// Used by nccl-harness and the plugin's tests to drive the plugin exactly as
// NCCL would. Header-only; thread-compatible.
#pragma once

#include <dlfcn.h>

#include <cstring>
#include <string>

#include "nccl_net_abi.h"

namespace lockstep::nccl::harness {

class NetApi {
 public:
  // Loads `path` and looks up ncclNetPlugin_<version> (v8, v9 or v10).
  bool Load(const std::string& path, const std::string& version, std::string* error) {
    lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return Fail(error, std::string("dlopen: ") + dlerror());
    const std::string symbol = "ncclNetPlugin_" + version;
    void* table = dlsym(lib_, symbol.c_str());
    if (table == nullptr) return Fail(error, "symbol " + symbol + " not found");
    if (version == "v8") v8_ = static_cast<const ncclNet_v8_t*>(table);
    else if (version == "v9") v9_ = static_cast<const ncclNet_v9_t*>(table);
    else if (version == "v10") v10_ = static_cast<const ncclNet_v10_t*>(table);
    else return Fail(error, "unknown API version " + version);
    return true;
  }

  const char* name() const { return v10_ ? v10_->name : v9_ ? v9_->name : v8_->name; }

  ncclResult_t init(ncclDebugLogger_t log) {
    return v10_ ? v10_->init(log, nullptr) : v9_ ? v9_->init(log) : v8_->init(log);
  }
  ncclResult_t devices(int* n) { return v10_ ? v10_->devices(n) : v9_ ? v9_->devices(n) : v8_->devices(n); }
  ncclResult_t getProperties(int dev, ncclNetProperties_v10_t* p) {
    if (v10_) return v10_->getProperties(dev, p);
    if (v9_) return v9_->getProperties(dev, p);
    ncclNetProperties_v8_t p8;
    ncclResult_t r = v8_->getProperties(dev, &p8);
    std::memset(p, 0, sizeof *p);
    p->name = p8.name;
    p->ptrSupport = p8.ptrSupport;
    p->speed = p8.speed;
    p->maxComms = p8.maxComms;
    p->maxRecvs = p8.maxRecvs;
    p->netDeviceType = p8.netDeviceType;
    return r;
  }
  ncclResult_t listen(int dev, void* handle, void** comm) {
    return v10_  ? v10_->listen(dev, handle, comm)
           : v9_ ? v9_->listen(dev, handle, comm)
                 : v8_->listen(dev, handle, comm);
  }
  ncclResult_t connect(int dev, void* handle, void** comm) {
    ncclNetDeviceHandle_v8_t* dev_comm = nullptr;
    if (v10_) return v10_->connect(dev, nullptr, handle, comm, &dev_comm);
    return v9_ ? v9_->connect(dev, handle, comm, &dev_comm) : v8_->connect(dev, handle, comm, &dev_comm);
  }
  ncclResult_t accept(void* listen_comm, void** comm) {
    ncclNetDeviceHandle_v8_t* dev_comm = nullptr;
    if (v10_) return v10_->accept(listen_comm, comm, &dev_comm);
    return v9_ ? v9_->accept(listen_comm, comm, &dev_comm) : v8_->accept(listen_comm, comm, &dev_comm);
  }
  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mh) {
    return v10_  ? v10_->regMr(comm, data, size, type, mh)
           : v9_ ? v9_->regMr(comm, data, size, type, mh)
                 : v8_->regMr(comm, data, size, type, mh);
  }
  ncclResult_t deregMr(void* comm, void* mh) {
    return v10_ ? v10_->deregMr(comm, mh) : v9_ ? v9_->deregMr(comm, mh) : v8_->deregMr(comm, mh);
  }
  ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mh, void** req) {
    if (v10_) return v10_->isend(comm, data, size, tag, mh, nullptr, req);
    if (v9_) return v9_->isend(comm, data, size, tag, mh, req);
    return v8_->isend(comm, data, static_cast<int>(size), tag, mh, req);
  }
  ncclResult_t irecv(void* comm, void* data, size_t size, int tag, void* mh, void** req) {
    void* datas[1] = {data};
    int tags[1] = {tag};
    void* mhs[1] = {mh};
    if (v10_) {
      size_t sizes[1] = {size};
      return v10_->irecv(comm, 1, datas, sizes, tags, mhs, nullptr, req);
    }
    if (v9_) {
      size_t sizes[1] = {size};
      return v9_->irecv(comm, 1, datas, sizes, tags, mhs, req);
    }
    int sizes[1] = {static_cast<int>(size)};
    return v8_->irecv(comm, 1, datas, sizes, tags, mhs, req);
  }
  ncclResult_t test(void* req, int* done, int* size) {
    return v10_ ? v10_->test(req, done, size) : v9_ ? v9_->test(req, done, size) : v8_->test(req, done, size);
  }
  ncclResult_t closeSend(void* c) { return v10_ ? v10_->closeSend(c) : v9_ ? v9_->closeSend(c) : v8_->closeSend(c); }
  ncclResult_t closeRecv(void* c) { return v10_ ? v10_->closeRecv(c) : v9_ ? v9_->closeRecv(c) : v8_->closeRecv(c); }
  ncclResult_t closeListen(void* c) {
    return v10_ ? v10_->closeListen(c) : v9_ ? v9_->closeListen(c) : v8_->closeListen(c);
  }

 private:
  static bool Fail(std::string* error, const std::string& m) {
    if (error) *error = m;
    return false;
  }
  void* lib_ = nullptr;  // never closed: NCCL does not unload its plugin either
  const ncclNet_v8_t* v8_ = nullptr;
  const ncclNet_v9_t* v9_ = nullptr;
  const ncclNet_v10_t* v10_ = nullptr;
};

}  // namespace lockstep::nccl::harness
